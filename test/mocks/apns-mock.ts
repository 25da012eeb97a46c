/**
 * A loopback APNs: TLS HTTP/2 on 127.0.0.1, answering `POST /3/device/<token>` the way Apple documents
 * ("Handling notification responses from APNs"): status, `apns-id` header, `{"reason": "..."}` body,
 * and `timestamp` (ms) on 410.
 *
 * Checks, in order: path/method, injected faults, provider JWT (ES256 over a registered key id,
 * iss = team id, iat younger than `tokenMaxAgeSec` else 403 ExpiredProviderToken), apns-topic,
 * apns-push-type, apns-priority, apns-collapse-id, apns-id, apns-expiration, body (<= 4096 bytes, JSON object with
 * `aps`), device token (hex, not marked bad/unregistered). Accepted pushes are recorded.
 *
 * It also answers the Live Activity broadcast API (iOS 18), with the same JWT check: channel management
 * (`POST /1/apps/<bundle>/channels`, `GET /1/apps/<bundle>/all-channels`, `DELETE /1/apps/<bundle>/channels` with
 * `apns-channel-id`) and broadcast pushes (`POST /4/broadcasts/apps/<bundle>` with `apns-channel-id`), recorded in
 * `broadcasts`. One mock serves as the management and the broadcast origin.
 *
 *   const apns = await ApnsMock.start({ topic: 'com.example.app' });
 *   apns.addKey(testKey);                    // from generateApnsKey()
 *   apns.faults.next(3, { type: 'status', status: 503, reason: 'ServiceUnavailable', retryAfter: 2 });
 *   apns.faults.forToken(tok, { type: 'goaway' }, 1);
 *   apns.markUnregistered(tok2);
 *   ... apns.pushes, apns.answers, apns.peakConcurrency ...
 *   await apns.close();
 */
import { createPublicKey, randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import type { Http2ServerRequest, Http2ServerResponse, IncomingHttpHeaders } from 'node:http2';
import type { TestApnsKey } from './credentials.js';
import { decodeJwt, verifyEs256 } from './jwt.js';
import { MockHttp2Server, type MockServerOptions } from './server.js';

export interface ApnsMockOptions extends MockServerOptions {
  /** Topics pushes may carry; any other gives 400 DeviceTokenNotForTopic. Empty = any topic. */
  topic?: string | string[];
  /** Provider JWTs older than this are answered 403 ExpiredProviderToken. Default 3600 (Apple's rule). */
  tokenMaxAgeSec?: number;
}

export interface RecordedApnsPush {
  token: string;
  topic: string;
  pushType: string;
  priority: number | undefined;
  collapseId: string | undefined;
  /** apns-expiration (unix seconds), undefined when the header was absent */
  expiration: number | undefined;
  apnsId: string;
  headers: IncomingHttpHeaders;
  payload: Record<string, unknown>;
  /** The provider JWT that authorised it. */
  jwt: string;
  receivedAt: number;
}

export interface RecordedBroadcast {
  /** the request's path, /4/broadcasts/apps/<bundle id> */
  path: string;
  bundleId: string;
  channelId: string;
  pushType: string;
  priority: number | undefined;
  expiration: number | undefined;
  headers: IncomingHttpHeaders;
  payload: Record<string, unknown>;
}

export interface ApnsAnswerRecord {
  /** when the answer was sent (Date.now()) */
  at: number;
  token: string;
  status: number | 'goaway' | 'reset';
  reason?: string;
  jwt?: string;
}

const PUSH_TYPES = new Set([
  'alert',
  'background',
  'location',
  'voip',
  'complication',
  'fileprovider',
  'mdm',
  'liveactivity',
  'pushtotalk',
  'widgets',
  'controls',
]);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DEVICE_TOKEN = /^[0-9a-fA-F]{64,200}$/;
export const APNS_MAX_PAYLOAD = 4096;

class Answer {
  constructor(
    readonly status: number,
    readonly reason: string,
  ) {}
}

export class ApnsMock extends MockHttp2Server {
  readonly pushes: RecordedApnsPush[] = [];
  readonly answers: ApnsAnswerRecord[] = [];
  readonly broadcasts: RecordedBroadcast[] = [];
  /** the channels created, by bundle id: channel id -> message storage policy */
  readonly channels = new Map<string, Map<string, number>>();
  /** requests to the channel management API (method and path), in order */
  readonly managementRequests: { method: string; path: string; headers: IncomingHttpHeaders }[] = [];
  tokenMaxAgeSec: number;
  private readonly topics: Set<string>;
  private readonly keys = new Map<string, { teamId: string; publicKey: KeyObject }>();
  private readonly unregistered = new Map<string, number>();
  private readonly bad = new Set<string>();
  /** JWTs whose signature was already checked (Apple too validates a provider token once, not per push). */
  private readonly verified = new Set<string>();

  private constructor(options: ApnsMockOptions) {
    super();
    this.topics = new Set(options.topic === undefined ? [] : Array.isArray(options.topic) ? options.topic : [options.topic]);
    this.tokenMaxAgeSec = options.tokenMaxAgeSec ?? 3600;
  }

  static async start(options: ApnsMockOptions = {}): Promise<ApnsMock> {
    const mock = new ApnsMock(options);
    await mock.listen(options);
    return mock;
  }

  /** Registers a provider key (what uploading the .p8 to Apple amounts to). */
  addKey(key: TestApnsKey | { keyId: string; teamId: string; publicKey: KeyObject | string }): this {
    const { keyId, teamId } = 'credentials' in key ? key.credentials : key;
    const publicKey = typeof key.publicKey === 'string' ? createPublicKey(key.publicKey) : key.publicKey;
    this.keys.set(keyId, { teamId, publicKey });
    this.verified.clear();
    return this;
  }

  addTopic(topic: string): this {
    this.topics.add(topic);
    return this;
  }

  /** From now on the token answers 410 Unregistered with this timestamp (ms). */
  markUnregistered(token: string, at = Date.now()): this {
    this.unregistered.set(token, at);
    return this;
  }

  /** From now on the token answers 400 BadDeviceToken. */
  markBadToken(token: string): this {
    this.bad.add(token);
    return this;
  }

  /** Clears recordings, faults, token marks and counters; keys and topics stay. */
  reset(): void {
    this.pushes.length = 0;
    this.answers.length = 0;
    this.broadcasts.length = 0;
    this.managementRequests.length = 0;
    this.channels.clear();
    this.faults.clear();
    this.unregistered.clear();
    this.bad.clear();
    this.resetStats();
  }

  protected async handle(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    if (/^\/(1|4)\//.test(req.url)) return this.handleChannels(req, res);
    const match = /^\/3\/device\/([^/?]*)$/.exec(req.url);
    const token = match?.[1] ?? '';
    const authorization = req.headers.authorization;
    const jwt = typeof authorization === 'string' ? authorization.replace(/^bearer\s+/i, '') : undefined;
    const record = (status: ApnsAnswerRecord['status'], reason?: string) =>
      this.recording &&
      this.answers.push({ at: Date.now(), token, status, ...(reason !== undefined && { reason }), ...(jwt !== undefined && { jwt }) });
    const fail = (answer: Answer) => {
      record(answer.status, answer.reason);
      const body: Record<string, unknown> = { reason: answer.reason };
      if (answer.status === 410) body.timestamp = this.unregistered.get(token) ?? Date.now();
      MockHttp2Server.json(res, answer.status, body, { 'apns-id': requestApnsId(req) });
    };

    if (!match) return fail(new Answer(404, 'BadPath'));
    if (req.method !== 'POST') return fail(new Answer(405, 'MethodNotAllowed'));

    const fault = this.faults.take(token);
    if (fault?.type === 'status') {
      record(fault.status, fault.reason);
      const headers: Record<string, string> = { 'apns-id': requestApnsId(req) };
      if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
      const body: Record<string, unknown> = { reason: fault.reason };
      if (fault.status === 410) body.timestamp = Date.now();
      return MockHttp2Server.json(res, fault.status, body, headers);
    }
    if (fault && (await this.applyTransportFault(fault, req, res))) {
      if (fault.type === 'goaway' || fault.type === 'reset') record(fault.type);
      return;
    }

    const body = await MockHttp2Server.readBody(req);
    const problem = this.check(req, jwt, token, body);
    if (problem) return fail(problem);

    const payload = JSON.parse((body as Buffer).toString('utf8')) as Record<string, unknown>;
    const apnsId = requestApnsId(req);
    const priority = req.headers['apns-priority'];
    const collapseId = req.headers['apns-collapse-id'];
    const expiration = req.headers['apns-expiration'];
    if (!this.deliverable(res)) return;
    this.accepted += 1;
    this.onAccept?.(token);
    if (this.recording)
      this.pushes.push({
        token,
        topic: String(req.headers['apns-topic']),
        pushType: String(req.headers['apns-push-type']),
        priority: priority === undefined ? undefined : Number(priority),
        collapseId: typeof collapseId === 'string' ? collapseId : undefined,
        expiration: expiration === undefined ? undefined : Number(expiration),
        apnsId,
        headers: req.headers,
        payload,
        jwt: jwt ?? '',
        receivedAt: Date.now(),
      });
    record(200);
    res.writeHead(200, { 'apns-id': apnsId });
    res.end();
  }

  /** The channel management API and broadcast pushes (Apple's answers: status, `{"reason"}`, `apns-request-id`). */
  private async handleChannels(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const requestId = typeof req.headers['apns-request-id'] === 'string' ? req.headers['apns-request-id'] : randomUUID();
    const answer = (status: number, body?: Record<string, unknown>, headers: Record<string, string> = {}) => {
      if (body) return MockHttp2Server.json(res, status, body, { 'apns-request-id': requestId, ...headers });
      res.writeHead(status, { 'apns-request-id': requestId, ...headers });
      res.end();
    };
    const authorization = req.headers.authorization;
    const jwt = typeof authorization === 'string' ? authorization.replace(/^bearer\s+/i, '') : undefined;
    const body = await MockHttp2Server.readBody(req);
    const denied = this.checkJwt(jwt);
    if (denied) return answer(denied.status, { reason: denied.reason });
    const channelHeader = req.headers['apns-channel-id'];
    const channelId = typeof channelHeader === 'string' ? channelHeader : undefined;

    const manage = /^\/1\/apps\/([^/?]+)\/(channels|all-channels)$/.exec(req.url);
    if (manage) {
      const bundleId = decodeURIComponent(manage[1]!);
      const channels = this.channels.get(bundleId) ?? new Map<string, number>();
      this.channels.set(bundleId, channels);
      if (this.recording) this.managementRequests.push({ method: req.method, path: req.url, headers: req.headers });
      if (manage[2] === 'all-channels') {
        if (req.method !== 'GET') return answer(405, { reason: 'MethodNotAllowed' });
        return answer(200, { channels: [...channels.keys()] });
      }
      if (req.method === 'POST') {
        const parsed = parseJson(body);
        if (!parsed) return answer(400, { reason: 'BadPayload' });
        const policy = parsed['message-storage-policy'];
        if (policy !== 0 && policy !== 1) return answer(400, { reason: 'BadMessageStoragePolicy' });
        if (parsed['push-type'] !== 'LiveActivity') return answer(400, { reason: 'InvalidPushType' });
        const id = randomBytes(16).toString('base64');
        channels.set(id, policy);
        return answer(201, undefined, { 'apns-channel-id': id });
      }
      if (req.method === 'DELETE') {
        if (channelId === undefined || !channels.delete(channelId)) return answer(404, { reason: 'ChannelNotRegistered' });
        return answer(204);
      }
      return answer(405, { reason: 'MethodNotAllowed' });
    }

    const broadcast = /^\/4\/broadcasts\/apps\/([^/?]+)$/.exec(req.url);
    if (!broadcast) return answer(404, { reason: 'BadPath' });
    if (req.method !== 'POST') return answer(405, { reason: 'MethodNotAllowed' });
    const bundleId = decodeURIComponent(broadcast[1]!);
    if (channelId === undefined || !this.channels.get(bundleId)?.has(channelId)) return answer(400, { reason: 'BadChannelId' });
    if (req.headers['apns-push-type'] !== 'liveactivity') return answer(400, { reason: 'InvalidPushType' });
    const priority = req.headers['apns-priority'];
    if (priority !== undefined && !['1', '5', '10'].includes(String(priority))) return answer(400, { reason: 'BadPriority' });
    if (body === 'too-large' || body.length > APNS_MAX_PAYLOAD) return answer(413, { reason: 'PayloadTooLarge' });
    const payload = parseJson(body);
    if (!payload || typeof payload.aps !== 'object' || payload.aps === null) return answer(400, { reason: 'BadPayload' });
    const expiration = req.headers['apns-expiration'];
    if (this.recording)
      this.broadcasts.push({
        path: req.url,
        bundleId,
        channelId,
        pushType: String(req.headers['apns-push-type']),
        priority: priority === undefined ? undefined : Number(priority),
        expiration: expiration === undefined ? undefined : Number(expiration),
        headers: req.headers,
        payload,
      });
    return answer(200);
  }

  /** The provider JWT: present, of a registered key and its team, signed by it, not from the future, not too old. */
  private checkJwt(jwt: string | undefined): Answer | undefined {
    if (jwt === undefined || jwt === '') return new Answer(403, 'MissingProviderToken');
    const decoded = decodeJwt(jwt);
    const key = typeof decoded?.header.kid === 'string' ? this.keys.get(decoded.header.kid) : undefined;
    if (!decoded || !key || decoded.claims.iss !== key.teamId) return new Answer(403, 'InvalidProviderToken');
    if (!this.verified.has(jwt)) {
      if (!verifyEs256(decoded, key.publicKey)) return new Answer(403, 'InvalidProviderToken');
      if (this.verified.size > 10_000) this.verified.clear();
      this.verified.add(jwt);
    }
    const iat = decoded.claims.iat;
    const now = Math.floor(Date.now() / 1000);
    if (typeof iat !== 'number' || iat > now + 60) return new Answer(403, 'InvalidProviderToken');
    if (now - iat > this.tokenMaxAgeSec) return new Answer(403, 'ExpiredProviderToken');
    return undefined;
  }

  /** Everything Apple validates, in Apple's order of concern; undefined = accept. */
  private check(req: Http2ServerRequest, jwt: string | undefined, token: string, body: Buffer | 'too-large'): Answer | undefined {
    const denied = this.checkJwt(jwt);
    if (denied) return denied;

    const topic = req.headers['apns-topic'];
    if (typeof topic !== 'string' || topic === '') return new Answer(400, 'MissingTopic');
    if (this.topics.size > 0 && !this.topics.has(topic)) return new Answer(400, 'DeviceTokenNotForTopic');
    const pushType = req.headers['apns-push-type'];
    if (typeof pushType !== 'string' || !PUSH_TYPES.has(pushType)) return new Answer(400, 'InvalidPushType');
    const priority = req.headers['apns-priority'];
    if (priority !== undefined && !['1', '5', '10'].includes(String(priority))) return new Answer(400, 'BadPriority');
    const collapseId = req.headers['apns-collapse-id'];
    if (typeof collapseId === 'string' && Buffer.byteLength(collapseId) > 64) return new Answer(400, 'BadCollapseId');
    const apnsId = req.headers['apns-id'];
    if (typeof apnsId === 'string' && !UUID.test(apnsId)) return new Answer(400, 'BadMessageId');
    const expiration = req.headers['apns-expiration'];
    if (expiration !== undefined && !/^\d+$/.test(String(expiration))) return new Answer(400, 'BadExpirationDate');

    if (body === 'too-large' || body.length > APNS_MAX_PAYLOAD) return new Answer(413, 'PayloadTooLarge');
    if (body.length === 0) return new Answer(400, 'PayloadEmpty');
    let payload: unknown;
    try {
      payload = JSON.parse(body.toString('utf8'));
    } catch {
      return new Answer(400, 'BadPayload');
    }
    const aps = (payload as { aps?: unknown } | null)?.aps;
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload) || typeof aps !== 'object' || aps === null)
      return new Answer(400, 'BadPayload');

    if (!DEVICE_TOKEN.test(token) || this.bad.has(token)) return new Answer(400, 'BadDeviceToken');
    if (this.unregistered.has(token)) return new Answer(410, 'Unregistered');
    return undefined;
  }
}

function parseJson(body: Buffer | 'too-large'): Record<string, unknown> | undefined {
  if (body === 'too-large') return undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function requestApnsId(req: Http2ServerRequest): string {
  const id = req.headers['apns-id'];
  return typeof id === 'string' && UUID.test(id) ? id.toLowerCase() : randomUUID();
}

/** A random 64-hex-digit device token. */
export function randomApnsToken(): string {
  return randomBytes(32).toString('hex');
}
