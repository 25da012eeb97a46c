import type { AppService } from '../services/apps.js';
import type { Caller } from '../services/devices.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyRole } from '../db/schema.js';
import { ForbiddenError, UnauthorizedError } from '../domain/errors.js';
import { roleAllows, type Permission } from '../domain/keys.js';
import { IdentitySecret } from '../domain/identity.js';
import type { Actor } from '../domain/audit.js';

export interface Principal {
  appId: string;
  bundleId: string;
  role: KeyRole;
  keyId: string;
  /** The key's own rate limit (pushd key set-limit), or null for its role's default. */
  rateLimit: { perSecond: number; burst: number } | null;
  /** The app's identity secret while identity verification is on, else null. */
  identity: IdentitySecret | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
    /** set when the request made an actor for an audit row: its answer is logged at info (request-logger.ts) */
    audited?: true;
  }
}

/** Parses `Authorization: Basic base64(username:key)`; null when absent or malformed. */
export function parseBasic(header: string | undefined): { username: string; key: string } | null {
  if (!header) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { username: decoded.slice(0, colon), key: decoded.slice(colon + 1) };
}

/**
 * A preHandler that authenticates the key (password) and checks it grants `permission` (one of them, given a list).
 * The username must be empty or the bundle id of the key's app.
 */
export function requirePermission(ctx: { services: { apps: AppService } }, permission: Permission | readonly Permission[]) {
  const permissions = [permission].flat();
  // the permissions ride on the hook so the API document can name the keys a route takes (src/http/openapi.ts)
  return Object.assign(authenticate, { permissions });
  async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const credentials = parseBasic(request.headers.authorization);
    if (!credentials || credentials.key.length === 0) return unauthorized(reply);
    const key = await ctx.services.apps.findActiveKey(credentials.key);
    if (!key) return unauthorized(reply);
    if (credentials.username !== '' && credentials.username !== key.bundle_id) return unauthorized(reply);
    if (!permissions.some((p) => roleAllows(key.role, p))) throw new ForbiddenError();
    const rateLimit =
      key.rate_limit_per_second !== null && key.rate_limit_burst !== null
        ? { perSecond: key.rate_limit_per_second, burst: key.rate_limit_burst }
        : null;
    const identity = key.identity_secret === null ? null : new IdentitySecret(key.identity_secret);
    request.principal = { appId: key.app_id, bundleId: key.bundle_id, role: key.role, keyId: key.id, rateLimit, identity };
  }
}

function unauthorized(reply: FastifyReply): never {
  // A script's own request (the console's fetch) gets no challenge: browsers answer a challenge with their own
  // password dialog instead of letting the script show the error.
  if (reply.request.headers['x-requested-with'] !== 'XMLHttpRequest') reply.header('www-authenticate', 'Basic realm="push"');
  throw new UnauthorizedError();
}

/**
 * Who calls, as the device service needs it: the key's role, the client address (the phone's, for an sdk key), and
 * the secret its identity claims are checked with.
 */
/** Who makes a change, as the audit log records it: the request's key, its client address and the request's id. */
export const actorOf = (request: FastifyRequest): Actor => {
  request.audited = true;
  return { keyId: request.principal.keyId, role: request.principal.role, address: request.ip ?? null, requestId: String(request.id) };
};

export const callerOf = (request: FastifyRequest): Caller => ({
  role: request.principal.role,
  ip: request.ip ?? null,
  identity: request.principal.identity,
});
