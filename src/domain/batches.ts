import type { Platform } from './device-input.js';
import { batchId } from './batch-id.js';
import { abPoint, bucketOf, HOLDOUT, REST, type AbBounds } from './ab-test.js';

/** A batch cut from a notification's audience, as stored: its devices all need one gateway. */
export interface NewBatch {
  id: string;
  seq: number;
  platform: Platform;
  development: boolean;
  deviceIds: string[];
  /** a paced batch is not sent before this */
  notBefore?: Date | null;
  /** held for a release that enqueues it (a best-time wave): no delivery job until then */
  held?: boolean;
  /** an A/B test's variant, and whether the batch is of the rest (sent the winner) */
  variant?: number | null;
  abRest?: boolean;
}

/** What cutting a device into a batch reads of it: the gateway it needs. */
export interface Routed {
  id: string;
  platform: Platform;
  development: boolean;
}

/** A device of an audience; `not_allowed`: its notifications are Disabled and the push is visible (not sent). */
export type Candidate = Routed & { not_allowed: boolean };

/** Devices that need one gateway, in id order; `tokens`, when read with them, at the same places as `ids`. */
export interface GatewayGroup {
  platform: Platform;
  development: boolean;
  ids: string[];
  tokens?: string[];
}

/**
 * The devices a push is sent to, and how many are not (`not_allowed`: their notifications are Disabled and the push
 * is visible); the second are counted in the notification's `devices_not_allowed`, not in `devices_targeted`.
 */
export function allowedOf<T extends Candidate>(devices: T[]): { sendable: T[]; notAllowed: number } {
  const sendable = devices.filter((d) => !d.not_allowed);
  return { sendable, notAllowed: devices.length - sendable.length };
}

/** A page of devices split per platform and environment (the gateway each one needs), at most `batchSize` each. */
export function splitIntoBatches<T extends Routed>(page: T[], batchSize: number): T[][] {
  const groups = new Map<string, T[]>();
  for (const d of page) {
    const key = `${d.platform}:${d.development}`;
    const list = groups.get(key);
    if (list) list.push(d);
    else groups.set(key, [d]);
  }
  const batches: T[][] = [];
  for (const devices of groups.values()) for (let i = 0; i < devices.length; i += batchSize) batches.push(devices.slice(i, i + batchSize));
  return batches;
}

/**
 * What a notification whose whole audience is these devices is inserted with: its batches, devices targeted and
 * not allowed (none: its fan-out will cut it).
 */
export function cutOf(
  devices: Candidate[] | undefined,
  batchSize: number,
): { batches: number; targeted: number; notAllowed: number } | undefined {
  if (!devices) return undefined;
  const { sendable, notAllowed } = allowedOf(devices);
  return { batches: splitIntoBatches(sendable, batchSize).length, targeted: sendable.length, notAllowed };
}

/** `splitIntoBatches`, as the batches of a notification (ids and sequence numbers from `firstSeq`). */
export function cutBatches(notificationId: string, generation: number, page: Routed[], firstSeq: number, batchSize: number): NewBatch[] {
  const groups = splitIntoBatches(page, batchSize).map((devices) => ({
    platform: devices[0]!.platform,
    development: devices[0]!.development,
    ids: devices.map((d) => d.id),
  }));
  return batchesOfGroups(notificationId, generation, groups, firstSeq, batchSize);
}

/** Device ids grouped by the gateway they need, as the batches of a notification of at most `batchSize` each. */
export function batchesOfGroups(
  notificationId: string,
  generation: number,
  groups: GatewayGroup[],
  firstSeq: number,
  batchSize: number,
): NewBatch[] {
  const batches: NewBatch[] = [];
  for (const { platform, development, ids } of groups)
    for (let i = 0; i < ids.length; i += batchSize) {
      const seq = firstSeq + batches.length;
      batches.push({ id: batchId(notificationId, generation, seq), seq, platform, development, deviceIds: ids.slice(i, i + batchSize) });
    }
  return batches;
}

/** The batches of `groups` whose tokens the page read, with them; the others are left to delivery jobs. */
export function withTokens(batches: NewBatch[], groups: GatewayGroup[]): { tokens: Map<string, string>; sent: NewBatch[] } {
  const tokens = new Map<string, string>();
  for (const g of groups) if (g.tokens) g.ids.forEach((id, i) => tokens.set(id, g.tokens![i]!));
  return { tokens, sent: tokens.size ? batches.filter((b) => tokens.has(b.deviceIds[0]!)) : [] };
}

/**
 * What a page of the fan-out stores: its batches, the devices they target, those not allowed, and an A/B test's
 * holdout devices (those that would have been sent to: the baseline its variants are measured against).
 */
export interface CutPage {
  batches: NewBatch[];
  targeted: number;
  notAllowed: number;
  holdout: string[];
}

/** An A/B test's stage as its fan-out cuts it: the test share per variant, or the rest (sent `winner`). */
export interface AbShare {
  bounds: AbBounds;
  rest: boolean;
  winner: number | null;
}

/**
 * A page of an A/B test's audience: the devices of the stage's share (each of the test share in its variant's
 * batches, by its bucket; the rest in the winner's), and the holdout's counted (during the test) and sent nothing.
 */
export function cutAbPage(
  ab: AbShare,
  notificationId: string,
  generation: number,
  page: Candidate[],
  firstSeq: number,
  batchSize: number,
): CutPage {
  const byVariant = new Map<number, Candidate[]>();
  const holdout: string[] = [];
  for (const d of page) {
    const bucket = bucketOf(abPoint(notificationId, d.id), ab.bounds);
    // a device that may not be shown the push is no baseline for those that are
    if (bucket === HOLDOUT && !ab.rest && !d.not_allowed) holdout.push(d.id);
    const variant = ab.rest ? (bucket === REST ? ab.winner! : null) : bucket >= 0 ? bucket : null;
    if (variant === null) continue;
    const list = byVariant.get(variant);
    if (list) list.push(d);
    else byVariant.set(variant, [d]);
  }
  const out: CutPage = { batches: [], targeted: 0, notAllowed: 0, holdout };
  for (const [variant, devices] of [...byVariant].sort((a, b) => a[0] - b[0])) {
    const { sendable, notAllowed } = allowedOf(devices);
    const batches = cutBatches(notificationId, generation, sendable, firstSeq + out.batches.length, batchSize);
    out.batches.push(...batches.map((b) => ({ ...b, variant, abRest: ab.rest })));
    out.targeted += sendable.length;
    out.notAllowed += notAllowed;
  }
  return out;
}
