import { beforeAll, describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';
import { alert, withPayload } from './notification-bodies.js';
import { countRows } from './support.js';

/** POST /v<N>/notifications with bodies that are not a JSON object, or not JSON, or too large. */

const UTF8_ONLY = 'content-type: JSON must be UTF-8 (charset=utf-8, or none)';

describe('bodies that are not a JSON object: a 4xx, never a 500', () => {
  const h = useHarness();
  let write: string;
  beforeAll(async () => {
    write = (await h.createApp()).keys.write;
  });

  const raw = (payload: string | Buffer | undefined, contentType?: string) =>
    h.server.inject({
      method: 'POST',
      url: '/v6/notifications',
      headers: { authorization: basic(write), ...(contentType ? { 'content-type': contentType } : {}) },
      ...(payload === undefined ? {} : { payload }),
    });

  it.each([
    ['malformed JSON', '{"notification": {', 'application/json', 400, 'body is not valid JSON'],
    ['trailing garbage', '{"notification": {}} x', 'application/json', 400, 'body is not valid JSON'],
    [
      '__proto__ key',
      '{"__proto__": {"admin": true}, "notification": {"to": "*", "payload": {"alert": "x"}}}',
      'application/json',
      400,
      'key "__proto__" is not allowed (it would reach the prototype of what it is copied into)',
    ],
    ['empty body declared as JSON', '', 'application/json', 400, 'body must not be empty'],
    ['text/plain', '{"notification": {"to": "*", "payload": {"alert": "x"}}}', 'text/plain', 415, 'content-type must be application/json'],
    [
      'JSON declared latin-1',
      '{"notification": {"to": "*", "payload": {"alert": "x"}}}',
      'application/json; charset=iso-8859-1',
      415,
      UTF8_ONLY,
    ],
    [
      'JSON declared UTF-16',
      '{"notification": {"to": "*", "payload": {"alert": "x"}}}',
      'application/json;charset="utf-16"',
      415,
      UTF8_ONLY,
    ],
    [
      'bytes that are not UTF-8 (é in latin-1)',
      Buffer.concat([Buffer.from('{"notification": {"to": "*", "payload": {"alert": "caf'), Buffer.from([0xe9]), Buffer.from('"}}}')]),
      'application/json',
      400,
      'body: is not valid UTF-8',
    ],
    ['form encoded', 'notification=1', 'application/x-www-form-urlencoded', 415, 'content-type must be application/json'],
    ['xml', '<notification/>', 'application/xml', 415, 'content-type must be application/json'],
  ] as const)('%s -> %i', async (_name, payload, contentType, status, error) => {
    const res = await raw(payload, contentType);
    expect(res.json()).toEqual({ error });
    expect(res.statusCode).toBe(status);
  });

  it('no body and no content type -> 400', async () => {
    const res = await raw(undefined);
    expect(res.json()).toEqual({ error: 'body must not be empty' });
    expect(res.statusCode).toBe(400);
  });

  it('a body over BODY_LIMIT_BYTES (1 MiB by default) -> 413', async () => {
    const res = await raw(JSON.stringify(withPayload({ alert: 'x'.repeat(1024 * 1024) })), 'application/json');
    expect(res.json()).toEqual({ error: 'body is too large' });
    expect(res.statusCode).toBe(413);
  });

  it('a body just under the limit is read, then validated (an alert this long is more than the gateways take)', async () => {
    const res = await raw(JSON.stringify(withPayload({ alert: 'x'.repeat(1000 * 1024) })), 'application/json');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/^notification\.payload: is too large: it maps to an APNs payload of 1024066 bytes/);
  });

  it('application/json with a UTF-8 charset parameter is JSON', async () => {
    const res = await raw(JSON.stringify(withPayload(alert)), 'application/json; charset=utf-8');
    expect(res.statusCode).toBe(201);
    expect((await raw(JSON.stringify(withPayload(alert)), "application/json; charset='utf8'")).statusCode).toBe(201);
    const upper = await raw(JSON.stringify(withPayload({ alert: 'café ☕' })), 'application/json; charset="UTF-8"');
    expect(upper.statusCode).toBe(201);
    expect(upper.json().notification.payload.alert).toBe('café ☕');
  });

  it('stored nothing for the refused bodies', async () => {
    // The three accepted bodies above are the only rows.
    expect(await countRows(h, 'notifications')).toBe(3);
  });
});
