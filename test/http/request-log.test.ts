import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { basic, useHarness } from '../helpers/harness.js';

/** At LOG_LEVEL=info a request that made an audited change logs its answer with the reqId its row stores. */
const lines: Record<string, unknown>[] = [];
const h = useHarness({
  env: { LOG_LEVEL: 'info' },
  logTo: new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  }),
});

describe('request log at info', () => {
  it('has a line for each audited request, carrying the request id of its audit row; none for a read', async () => {
    const app = await h.createApp();
    const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
      h.server.inject({ method, url, headers: { authorization: basic(app.keys.write) }, payload });
    const before = lines.length;
    expect((await call('GET', '/v6/key')).statusCode).toBe(200);
    const made = await call('POST', '/v6/journeys', {
      journey: { name: 'Logged', trigger: { api: true }, steps: [{ id: 'wait', type: 'delay', duration: '1h' }] },
    });
    expect(made.statusCode, made.body).toBe(201);
    const row = (await call('GET', '/v6/audit?action=journey.created')).json().entries[0];
    const logged = lines.slice(before).filter((l) => l.msg === 'request completed');
    expect(logged).toEqual([
      expect.objectContaining({
        level: 30,
        reqId: row.request_id,
        req: { method: 'POST', url: '/v6/journeys' },
        res: { statusCode: 201 },
      }),
    ]);
  });
});
