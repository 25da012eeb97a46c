/**
 * The contract between the delivery worker and the push gateways (APNs, FCM).
 *
 * The worker groups the devices of one notification by platform + environment, asks the
 * `GatewayPool` (./pool.ts) for the gateway of that app/platform/environment and calls `send` with
 * one chunk of devices. The gateway answers with exactly one `PushResult` per target, in the same
 * order, and never throws for a per-token problem. Every answer of Apple or Google (and every local
 * refusal, like a payload that is too large) is sorted into one of four outcomes by the single table
 * in ./outcomes.ts:
 *
 * - `ok`             the gateway accepted the push;
 * - `invalid_token`  the token is dead (app uninstalled, token of another app…): invalidate the device;
 * - `retry`          temporary (429, 5xx, timeouts, GOAWAY, stream resets…): send again later, not
 *                    before `retryAfterMs` when the gateway said so;
 * - `failed`         permanent for this push (bad request, payload too large, no or bad credentials…):
 *                    do not retry; the token stays valid.
 *
 * `send` rejects only on a programming error (e.g. called after `close`); callers may still guard it.
 */

import type { PushOptions } from '../domain/push-mapping.js';

/** How long one request to a gateway (a push, or an OAuth token) may take before it counts as a `retry`. */
export const GATEWAY_REQUEST_TIMEOUT_MS = 10_000;

export type PushOutcome =
  | { kind: 'ok' }
  | { kind: 'invalid_token'; reason: string }
  | { kind: 'retry'; reason: string; retryAfterMs?: number }
  | { kind: 'failed'; reason: string };

export type PushOutcomeKind = PushOutcome['kind'];

/** One device to push to. `deviceId` is echoed back so the worker never has to match tokens. */
export interface PushTarget {
  deviceId: string;
  token: string;
  /** a web device's subscription keys (base64url), which its push is encrypted to; absent for phones */
  keys?: WebPushKeys;
}

export interface WebPushKeys {
  p256dh: string;
  auth: string;
}

export interface PushResult {
  deviceId: string;
  outcome: PushOutcome;
}

/**
 * What is pushed: the stored, validated API payload (see src/domain/payload.ts), the notification id (`_nid`)
 * and its delivery options (expiry, priority; absent or null = unset).
 */
export interface NotificationPush extends PushOptions {
  notificationId: string;
  payload: Record<string, unknown>;
  /** a Live Activity push: `payload` is Apple's `{aps}` as stored, sent to the activity's topic (APNs only) */
  liveActivity?: boolean;
}

/** One content of a push and the targets that receive it. */
export interface ContentOf {
  payload: Record<string, unknown>;
  targets: PushTarget[];
}

export interface PushGateway {
  /** Sends one notification to many tokens of one platform+environment; one result per target, same order. */
  send(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]>;
  /**
   * Sends several contents of one notification (a templated batch's renders, a few devices each) as one send: one
   * result per target of each group, the groups' in order. Without it, each group is a send of its own.
   */
  sendEach?(push: Omit<NotificationPush, 'payload'>, groups: ContentOf[]): Promise<PushResult[]>;
  /** Closes connections after in-flight requests finish. Idempotent. */
  close(): Promise<void>;
}

/** `development` devices go to the APNs sandbox; FCM and Web Push have a single environment. */
export type PushEnvironment = 'production' | 'development';

export type PushPlatform = 'ios' | 'android' | 'web' | 'huawei';

/** The same outcome for every target: a gateway that cannot send them now. */
export function answerAll(targets: readonly PushTarget[], outcome: PushOutcome): PushResult[] {
  return targets.map((t) => ({ deviceId: t.deviceId, outcome }));
}

/** What a gateway closing for shutdown answers the sends it no longer takes: they are tried again elsewhere. */
export const GATEWAY_CLOSED: PushOutcome = { kind: 'retry', reason: 'gateway closed' };
