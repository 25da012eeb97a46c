/**
 * APNs gateway on @parse/node-apn (HTTP/2, token auth).
 *
 * One `ApnsGateway` = up to `maxConnections` node-apn Providers, each one long-lived HTTP/2 connection with its
 * own provider JWT, to one origin (production or sandbox) for one key + topic. The GatewayPool
 * (./pool.ts) keeps one per app + environment + credentials and reuses it across batches.
 *
 * How node-apn 8.1 is driven, and why (read from node_modules/@parse/node-apn/lib):
 * - `address`/`port` come from the origin URL (APNS_ORIGIN_PRODUCTION / APNS_ORIGIN_SANDBOX); TLS trust
 *   is Node's default store, so NODE_EXTRA_CA_CERTS works without any option here.
 * - `connectionRetryLimit: 0`: node-apn's own retry re-sends 429/5xx at once on the same session (its
 *   Retry-After handling can't work: it reads `headers['Retry-After']`, but HTTP/2 header names are
 *   lower-case, and it deletes `retryAfter` before answering). We answer `retry` instead and let the
 *   worker reschedule with backoff. Consequence: APNs retry outcomes carry no retryAfterMs (APNs does
 *   not document a Retry-After header anyway).
 * - 403 ExpiredProviderToken: node-apn regenerates the JWT of the client that got it before reporting
 *   the failure (guarded by a generation counter, so a burst of 403s causes one regeneration). We
 *   re-send once on the same Provider, i.e. with the fresh JWT; a second 403 answers `retry`.
 *   node-apn also renews each JWT proactively after 55 minutes.
 * - Our own plain Providers instead of node-apn's MultiProvider: the re-send above must reach the client
 *   that regenerated, and MultiClient.shutdown() awaits its clients one after the other — a client whose
 *   session was destroyed by a connection error never calls back (it calls session.close() on a
 *   destroyed session), which would leave the other connections open.
 * - node-apn opens a stream per recipient all at once (Promise.allSettled over the list). We hand it
 *   a chunk of tokens per `send` call through a StreamPool shared by all sends of this gateway: each
 *   Provider carries as many streams as APNs announces on its connection (watched on node-apn's session),
 *   another Provider is opened when they are full, and at most `maxInFlight` streams are open in all.
 */
import apn from '@parse/node-apn';
import type { Notification as ApnNotification, Provider } from '@parse/node-apn';
import { contentsJson } from '../domain/json-splice.js';
import { APNS_MAX_PAYLOAD_BYTES, toApnsRequest, toLiveActivityRequest, type ApnsHeaders } from '../domain/push-mapping.js';
import { liveActivityTopic } from '../domain/live-activity.js';
import type { Logger } from '../platform/logger.js';
import type { ApnsCredentials } from '../domain/credentials.js';
import type { ClientHttp2Session } from 'node:http2';
import { Drain } from './drain.js';
import './lean-async-bind.js';
import { StreamPool } from './stream-pool.js';
import { classify, type GatewayAnswer } from './outcomes.js';
import {
  answerAll,
  GATEWAY_CLOSED,
  GATEWAY_REQUEST_TIMEOUT_MS,
  type ContentOf,
  type NotificationPush,
  type PushGateway,
  type PushOutcome,
  type PushResult,
  type PushTarget,
} from './types.js';

export { parseApnsCredentials, type ApnsCredentials } from '../domain/credentials.js';

export interface ApnsGatewayOptions {
  credentials: ApnsCredentials;
  /** apns-topic: the credentials' topic, else the app's bundle id. */
  topic: string;
  /** e.g. https://api.push.apple.com or https://api.sandbox.push.apple.com (port optional, default 443). */
  origin: string;
  /** HTTP/2 connections (node-apn Providers) at most; another opens when the open ones are full. Default 4. */
  maxConnections?: number;
  /** Streams open at once across all connections (a memory bound). Default 2000. */
  maxInFlight?: number;
  /** Per-request timeout in ms (node-apn `requestTimeout`). Default 10000. */
  requestTimeoutMs?: number;
  /** PING interval in ms that keeps idle connections checked (node-apn `heartBeat`). Default 60000. */
  heartbeatMs?: number;
  log?: Logger;
}

/** The shape node-apn gives a failed recipient (its typings omit that `error` is a VError with a message). */
interface ApnFailure {
  device?: string;
  status?: number;
  response?: { reason?: string; timestamp?: number | string };
  error?: { message?: string };
}

const HEX_TOKEN = /^[0-9a-fA-F]+$/;

/** How long close() waits for a node-apn connection to report it has closed (see the header comment). */
const SHUTDOWN_GRACE_MS = 2000;

export class ApnsGateway implements PushGateway {
  private readonly providers: StreamPool<Provider>;
  private readonly drain = new Drain();
  private closing: Promise<void> | undefined;

  constructor(private readonly options: ApnsGatewayOptions) {
    const { host, port } = parseOrigin(options.origin);
    const maxConnections = options.maxConnections ?? 4;
    if (!Number.isInteger(maxConnections) || maxConnections < 1)
      throw new RangeError(`maxConnections must be a positive integer, got ${maxConnections}`);
    this.providers = new StreamPool(
      () =>
        watchAnnouncedStreams(
          new apn.Provider({
            token: { key: options.credentials.keyPem, keyId: options.credentials.keyId, teamId: options.credentials.teamId },
            address: host,
            port,
            connectionRetryLimit: 0,
            requestTimeout: options.requestTimeoutMs ?? GATEWAY_REQUEST_TIMEOUT_MS,
            heartBeat: options.heartbeatMs ?? 60_000,
          }),
        ),
      announcedStreams,
      { maxConnections, maxInFlight: options.maxInFlight ?? 2000, origin: options.origin },
    );
  }

  async send(push: NotificationPush, targets: PushTarget[]): Promise<PushResult[]> {
    return this.sendEach(push, [{ payload: push.payload, targets }]);
  }

  async sendEach(push: Omit<NotificationPush, 'payload'>, groups: ContentOf[]): Promise<PushResult[]> {
    const run = this.drain.track(() => this.sendAll(push, groups));
    return (
      run ??
      answerAll(
        groups.flatMap((g) => g.targets),
        GATEWAY_CLOSED,
      )
    );
  }

  private async sendAll(push: Omit<NotificationPush, 'payload'>, groups: ContentOf[]): Promise<PushResult[]> {
    const targets = groups.length === 1 ? groups[0]!.targets : groups.flatMap((g) => g.targets);
    const outcomes = new Array<PushOutcome>(targets.length);
    // each target's note (null: its content is too large), by its index
    const noteOf = new Array<ApnNotification | null>(targets.length);
    const notes = this.notesOf(
      push,
      groups.map((g) => g.payload),
    );
    let at = 0;
    groups.forEach((g, k) => noteOf.fill(notes[k]!, at, (at += g.targets.length)));
    const sendable: number[] = []; // indexes into targets
    targets.forEach((t, i) => {
      // APNs would answer 413 PayloadTooLarge for every token; don't send what can't succeed.
      if (!noteOf[i]) outcomes[i] = classify({ gateway: 'apns', status: 413, reason: 'PayloadTooLarge' }).outcome;
      // APNs tokens are hex; anything else can never be delivered (and must not reach the URL path).
      else if (HEX_TOKEN.test(t.token)) sendable.push(i);
      else outcomes[i] = classify({ gateway: 'apns', status: 400, reason: 'BadDeviceToken' }).outcome;
    });

    await this.providers.run(sendable, async (provider, indexes) => {
      const send = (note: ApnNotification, chunk: number[]) => this.sendNote(provider, note, targets, chunk, outcomes);
      if (groups.length === 1) return send(noteOf[indexes[0]!]!, indexes);
      // one node-apn send per content in the chunk
      const byNote = new Map<ApnNotification, number[]>();
      for (const i of indexes) {
        const note = noteOf[i]!;
        const same = byNote.get(note);
        if (same) same.push(i);
        else byNote.set(note, [i]);
      }
      await Promise.all([...byNote].map(([note, chunk]) => send(note, chunk)));
    });

    return targets.map((t, i) => {
      const outcome = outcomes[i] as PushOutcome;
      if (outcome.kind === 'retry' || outcome.kind === 'failed')
        this.options.log?.debug({ reason: outcome.reason }, 'apns push not delivered');
      return { deviceId: t.deviceId, outcome };
    });
  }

  /** The node-apn note of each content, or null when it is larger than APNs accepts. */
  private notesOf(push: Omit<NotificationPush, 'payload'>, payloads: Record<string, unknown>[]): (ApnNotification | null)[] {
    const requestOf = (payload: Record<string, unknown>) =>
      push.liveActivity ? toLiveActivityRequest(payload, push) : toApnsRequest(payload, push.notificationId, push);
    // contents that differ only in texts have the same headers: the first's
    const { json, spliced } = contentsJson(payloads, (p) => JSON.stringify(requestOf(p).body));
    const headers = spliced ? requestOf(payloads[0]!).headers : null;
    return payloads.map((p, k) => this.noteOf(push, headers ?? requestOf(p).headers, json(k)));
  }

  private noteOf(push: Omit<NotificationPush, 'payload'>, headers: ApnsHeaders, json: string): ApnNotification | null {
    if (Buffer.byteLength(json, 'utf8') > APNS_MAX_PAYLOAD_BYTES) return null;
    const note = new apn.Notification();
    // node-apn sends what compile() answers, which is this once set: the body is not serialised again
    (note as unknown as { compiled: string }).compiled = json;
    note.topic = push.liveActivity ? liveActivityTopic(this.options.topic) : this.options.topic;
    note.pushType = headers['apns-push-type'];
    note.priority = headers['apns-priority'];
    const collapseId = headers['apns-collapse-id'];
    if (collapseId !== undefined) note.collapseId = collapseId;
    // node-apn sends apns-expiration only for an expiry >= 0 (its default, -1, sends none).
    const expiration = headers['apns-expiration'];
    if (expiration !== undefined) note.expiry = expiration;
    return note;
  }

  /** One note to the targets at `indexes`, their outcomes set; a token whose JWT was just renewed is sent once more. */
  private async sendNote(provider: Provider, note: ApnNotification, targets: PushTarget[], indexes: number[], outcomes: PushOutcome[]) {
    const answers = await this.attempt(
      provider,
      note,
      indexes.map((i) => (targets[i] as PushTarget).token),
    );
    const refresh: number[] = [];
    indexes.forEach((i, k) => {
      const { outcome, refreshAuth } = classify(answers[k] as GatewayAnswer);
      if (refreshAuth)
        refresh.push(i); // node-apn has just regenerated this provider's JWT: one re-send with it
      else outcomes[i] = outcome;
    });
    if (refresh.length === 0) return;
    const again = await this.attempt(
      provider,
      note,
      refresh.map((i) => (targets[i] as PushTarget).token),
    );
    refresh.forEach((i, k) => (outcomes[i] = classify(again[k] as GatewayAnswer).outcome));
  }

  /** One node-apn send for a chunk of tokens; one answer per token, in order. */
  private async attempt(provider: Provider, note: ApnNotification, tokens: string[]): Promise<GatewayAnswer[]> {
    let sent: { device: string }[];
    let failed: ApnFailure[];
    try {
      ({ sent, failed } = (await provider.send(note, tokens)) as unknown as { sent: { device: string }[]; failed: ApnFailure[] });
    } catch (err) {
      // node-apn settles every recipient, so this is unexpected; still, nothing is dropped.
      const answer: GatewayAnswer = { gateway: 'apns', transportError: (err as Error).message ?? String(err) };
      return tokens.map(() => answer);
    }
    if (sent.length === tokens.length) return tokens.map(() => OK_ANSWER);
    // node-apn answers with two lists keyed by token; a failure without a device is a client-level error.
    const byToken = new Map<string, GatewayAnswer>();
    for (const ok of sent) byToken.set(ok.device, OK_ANSWER);
    for (const f of failed) if (f.device !== undefined) byToken.set(f.device, answerOf(f));
    const clientError = failed.find((f) => f.device === undefined);
    return tokens.map((t) => byToken.get(t) ?? answerOf(clientError));
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.drain.close();
      // Nothing is in flight any more, so a healthy connection closes at once; a destroyed one never
      // calls back, hence the grace timer (its timers are already cleared by then).
      await Promise.all(
        this.providers.connections.map(
          (p) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, SHUTDOWN_GRACE_MS);
              void p.shutdown(() => {
                clearTimeout(timer);
                resolve();
              });
            }),
        ),
      );
    })();
    return this.closing;
  }
}

const OK_ANSWER: GatewayAnswer = { gateway: 'apns', status: 200 };

interface ApnClient {
  session?: ClientHttp2Session;
  connect(): Promise<void>;
}
const clientOf = (provider: Provider) => (provider as unknown as { client: ApnClient }).client;
const announced = new WeakMap<ClientHttp2Session, number>();

/**
 * Follows the SETTINGS_MAX_CONCURRENT_STREAMS of each HTTP/2 session node-apn opens for this Provider. node-apn
 * creates its session lazily inside `client.connect()`; a listener added as that promise settles is in place
 * before any frame is read. (`session.remoteSettings` is no substitute: until the peer's SETTINGS arrive it
 * answers Node's assumed 100, more than a gateway may allow.)
 */
function watchAnnouncedStreams(provider: Provider): Provider {
  const client = clientOf(provider);
  const connect = client.connect.bind(client);
  client.connect = () => {
    const connecting = connect();
    connecting.then(
      () => {
        const session = client.session;
        if (session && !session.listenerCount('remoteSettings'))
          session.on('remoteSettings', (settings) => announced.set(session, settings.maxConcurrentStreams ?? 100));
      },
      () => undefined,
    );
    return connecting;
  };
  return provider;
}

/** The streams APNs allows on a Provider's connection now; undefined until its SETTINGS arrive. */
function announcedStreams(provider: Provider): number | undefined {
  const session = clientOf(provider).session;
  if (!session || session.closed || session.destroyed) return undefined;
  return announced.get(session);
}

/** Normalises a node-apn failure into a gateway answer for the outcome table. */
function answerOf(failure: ApnFailure | undefined): GatewayAnswer {
  if (!failure) return { gateway: 'apns', transportError: 'no answer from node-apn' };
  if (typeof failure.status === 'number') {
    // node-apn keeps the body's reason, except for ExpiredProviderToken which it moves to error.message.
    const reason = failure.response?.reason ?? (failure.error?.message === 'ExpiredProviderToken' ? 'ExpiredProviderToken' : undefined);
    return reason === undefined ? { gateway: 'apns', status: failure.status } : { gateway: 'apns', status: failure.status, reason };
  }
  return { gateway: 'apns', transportError: failure.error?.message ?? 'unknown error' };
}

/** node-apn wants a bare host and a port; the config gives an origin URL. */
export function parseOrigin(origin: string): { host: string; port: number } {
  const url = new URL(origin);
  if (url.protocol !== 'https:') throw new Error(`APNs origin must be https: ${origin}`);
  if (url.pathname !== '/' && url.pathname !== '') throw new Error(`APNs origin must not have a path: ${origin}`);
  return { host: url.hostname, port: url.port === '' ? 443 : Number(url.port) };
}
