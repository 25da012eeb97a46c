/**
 * APNs broadcast channels (iOS 18 Live Activities): Apple's channel management API ("Sending channel management
 * requests to APNs": `POST /1/apps/<bundle id>/channels`, `GET /1/apps/<bundle id>/all-channels`,
 * `DELETE /1/apps/<bundle id>/channels`) and the broadcast push ("Sending broadcast push notification requests to
 * APNs": `POST /4/broadcasts/apps/<bundle id>` with `apns-channel-id`). Token auth as for pushes: an ES256 provider
 * JWT, renewed before Apple's hour. One HTTP/2 connection per origin, kept and reconnected on demand.
 */
import { createPrivateKey, createSign, randomUUID } from 'node:crypto';
import type { ApnsCredentials } from '../domain/credentials.js';
import { toLiveActivityRequest, APNS_MAX_PAYLOAD_BYTES, type PushOptions } from '../domain/push-mapping.js';
import { Http2Origin, TransportError, type Http2Response } from './http2-client.js';
import { classify } from './outcomes.js';
import { GATEWAY_REQUEST_TIMEOUT_MS, type PushOutcome } from './types.js';

export interface ApnsChannelsOptions {
  /** channel management: api-manage-broadcast.push.apple.com:2196 and its sandbox, :2195 */
  managementOrigin: { production: string; sandbox: string };
  /** broadcast pushes: api.push.apple.com and its sandbox */
  broadcastOrigin: { production: string; sandbox: string };
  requestTimeoutMs?: number;
}

/** The app as channel requests need it: the key that signs, and the bundle id the paths name. */
export interface ChannelApp {
  credentials: ApnsCredentials;
  bundleId: string;
}

/** An answer of the management API that is not a success: its status and Apple's reason. */
export class ChannelApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
  ) {
    super(`APNs answered ${status} ${reason}`);
  }
}

/** Apple refreshes nothing it accepted less than an hour ago; renewing at 50 minutes stays clear of the edge. */
const JWT_RENEW_MS = 50 * 60_000;

export class ApnsChannels {
  private readonly origins = new Map<string, Http2Origin>();
  private readonly jwts = new Map<string, { jwt: string; at: number }>();

  constructor(private readonly options: ApnsChannelsOptions) {}

  /** Creates a channel; answers APNs' channel id (the `apns-channel-id` answer header). */
  async create(app: ChannelApp, development: boolean, messageStoragePolicy: number): Promise<string> {
    const body = JSON.stringify({ 'message-storage-policy': messageStoragePolicy, 'push-type': 'LiveActivity' });
    const res = await this.manage(app, development, 'POST', `/1/apps/${app.bundleId}/channels`, {}, body);
    const id = res.headers['apns-channel-id'];
    if (typeof id !== 'string' || id === '') throw new ChannelApiError(res.status, 'no apns-channel-id in the answer');
    return id;
  }

  /** The app's channel ids as APNs has them. */
  async list(app: ChannelApp, development: boolean): Promise<string[]> {
    const res = await this.manage(app, development, 'GET', `/1/apps/${app.bundleId}/all-channels`, {}, undefined, true);
    const parsed = JSON.parse(res.body || '{}') as { channels?: unknown };
    return Array.isArray(parsed.channels) ? parsed.channels.filter((c): c is string => typeof c === 'string') : [];
  }

  async delete(app: ChannelApp, development: boolean, channelId: string): Promise<void> {
    await this.manage(app, development, 'DELETE', `/1/apps/${app.bundleId}/channels`, { 'apns-channel-id': channelId });
  }

  /** One broadcast push on a channel, its payload Apple's `{aps}`; the outcome as the one outcome table sorts it. */
  async broadcast(
    app: ChannelApp,
    development: boolean,
    channelId: string,
    payload: Record<string, unknown>,
    options: PushOptions,
  ): Promise<PushOutcome> {
    const request = toLiveActivityRequest(payload, options);
    if (request.bytes > APNS_MAX_PAYLOAD_BYTES) return classify({ gateway: 'apns', status: 413, reason: 'PayloadTooLarge' }).outcome;
    const headers: Record<string, string> = {
      authorization: `bearer ${this.jwtOf(app.credentials)}`,
      'apns-channel-id': channelId,
      'apns-push-type': request.headers['apns-push-type'],
      'apns-priority': String(request.headers['apns-priority']),
      'apns-request-id': randomUUID(),
      'content-type': 'application/json',
    };
    const expiration = request.headers['apns-expiration'];
    if (expiration !== undefined) headers['apns-expiration'] = String(expiration);
    const origin = this.origin(development ? this.options.broadcastOrigin.sandbox : this.options.broadcastOrigin.production);
    try {
      const res = await origin.request('POST', `/4/broadcasts/apps/${app.bundleId}`, headers, JSON.stringify(request.body), this.timeout);
      return classify(
        res.status < 300 ? { gateway: 'apns', status: res.status } : { gateway: 'apns', status: res.status, reason: reasonOf(res) },
      ).outcome;
    } catch (err) {
      return classify({ gateway: 'apns', transportError: (err as Error).message }).outcome;
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.origins.values()].map((o) => o.close()));
    this.origins.clear();
  }

  private get timeout(): number {
    return this.options.requestTimeoutMs ?? GATEWAY_REQUEST_TIMEOUT_MS;
  }

  private async manage(
    app: ChannelApp,
    development: boolean,
    method: string,
    path: string,
    extra: Record<string, string>,
    body?: string,
    keepBody = false,
  ): Promise<Http2Response> {
    const url = development ? this.options.managementOrigin.sandbox : this.options.managementOrigin.production;
    const headers = { authorization: `bearer ${this.jwtOf(app.credentials)}`, 'apns-request-id': randomUUID(), ...extra };
    let res: Http2Response;
    try {
      res = await this.origin(url, keepBody).request(method, path, headers, body, this.timeout);
    } catch (err) {
      throw new ChannelApiError(503, err instanceof TransportError ? err.message : String(err));
    }
    if (res.status >= 300) throw new ChannelApiError(res.status, reasonOf(res));
    return res;
  }

  private origin(url: string, keepSuccessBody = false): Http2Origin {
    const key = `${url}|${keepSuccessBody}`;
    let origin = this.origins.get(key);
    if (!origin) this.origins.set(key, (origin = new Http2Origin(url, { keepSuccessBody })));
    return origin;
  }

  /** The provider JWT of a key (ES256 over {iss: team id, iat}), made again after JWT_RENEW_MS. */
  private jwtOf(c: ApnsCredentials): string {
    const cacheKey = `${c.teamId}|${c.keyId}|${c.keyPem}`;
    const cached = this.jwts.get(cacheKey);
    if (cached && Date.now() - cached.at < JWT_RENEW_MS) return cached.jwt;
    const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const input = `${part({ alg: 'ES256', kid: c.keyId })}.${part({ iss: c.teamId, iat: Math.floor(Date.now() / 1000) })}`;
    const signature = createSign('sha256')
      .update(input)
      .sign({ key: createPrivateKey(c.keyPem), dsaEncoding: 'ieee-p1363' });
    const jwt = `${input}.${signature.toString('base64url')}`;
    this.jwts.set(cacheKey, { jwt, at: Date.now() });
    return jwt;
  }
}

function reasonOf(res: Http2Response): string {
  try {
    const reason = (JSON.parse(res.body) as { reason?: unknown }).reason;
    return typeof reason === 'string' ? reason : `status ${res.status}`;
  } catch {
    return `status ${res.status}`;
  }
}
