import http2 from 'node:http2';
import { createPrivateKey, sign } from 'node:crypto';
// the pipeline's workaround for Node 20's costly AsyncResource#bind, so the ceiling does not pay what pushd does not
import '../../src/gateways/lean-async-bind.js';

/**
 * The machine's ceiling: a bare node:http2 client sending the same pushes to the same mock gateways,
 * with nothing of the service in between (no queue, no database, no gateway library).
 */
export interface BareTarget {
  origin: string;
  path: (i: number) => string;
  headers: Record<string, string>;
  body: (i: number) => string | Buffer;
}

export async function bareSend(
  target: BareTarget,
  count: number,
  opts: { sessions: number; window: number },
): Promise<{ ms: number; ok: number }> {
  const sessions = Array.from({ length: opts.sessions }, () => http2.connect(target.origin));
  await Promise.all(sessions.map((s) => new Promise<void>((resolve, reject) => s.once('connect', () => resolve()).once('error', reject))));
  let next = 0;
  let ok = 0;
  const start = performance.now();
  const lane = async (session: http2.ClientHttp2Session) => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const status = await new Promise<number>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': target.path(i), ...target.headers });
        let code = 0;
        req.on('response', (h) => (code = Number(h[':status'])));
        req.on('data', () => undefined);
        req.on('end', () => resolve(code));
        req.on('error', reject);
        req.end(target.body(i));
      });
      if (status >= 200 && status < 300) ok++; // APNs and FCM answer 200, a Web Push service 201
    }
  };
  const lanes: Promise<void>[] = [];
  for (let w = 0; w < opts.window; w++) lanes.push(lane(sessions[w % sessions.length]!));
  await Promise.all(lanes);
  const ms = performance.now() - start;
  for (const s of sessions) s.close();
  return { ms, ok };
}

/** An APNs provider token (ES256 JWT), as any APNs client sends it. */
export function apnsJwt(keyPem: string, keyId: string, teamId: string): string {
  return es256Jwt(keyPem, { alg: 'ES256', kid: keyId }, { iss: teamId, iat: Math.floor(Date.now() / 1000) });
}

/** A JWT signed with ES256 by a P-256 private key (PEM): APNs provider tokens and VAPID (RFC 8292) alike. */
export function es256Jwt(keyPem: string, header: object, claims: object): string {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${b64(header)}.${b64(claims)}`;
  const signature = sign('sha256', Buffer.from(input), { key: createPrivateKey(keyPem), dsaEncoding: 'ieee-p1363' }).toString('base64url');
  return `${input}.${signature}`;
}
