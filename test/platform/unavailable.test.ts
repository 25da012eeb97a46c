import { describe, expect, it } from 'vitest';
import { retryWhileUnavailable } from '../../src/platform/unavailable.js';

const unavailable = () => Object.assign(new Error('the database system is shutting down'), { code: '57P03' });

describe('retryWhileUnavailable', () => {
  it('runs the work again while the database cannot serve, and answers what it then gives', async () => {
    let calls = 0;
    const answer = await retryWhileUnavailable(
      async () => {
        if (++calls < 3) throw unavailable();
        return 'recorded';
      },
      1000,
      10,
    );
    expect(answer).toBe('recorded');
    expect(calls).toBe(3);
  });

  it('throws any other error at once, and the last one once its time is up', async () => {
    let calls = 0;
    const refused = new Error('duplicate key');
    await expect(retryWhileUnavailable(async () => (calls++, Promise.reject(refused)), 1000, 10)).rejects.toBe(refused);
    expect(calls).toBe(1);
    calls = 0;
    const started = Date.now();
    await expect(retryWhileUnavailable(async () => (calls++, Promise.reject(unavailable())), 100, 20)).rejects.toMatchObject({
      code: '57P03',
    });
    expect(calls).toBeGreaterThan(2);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
