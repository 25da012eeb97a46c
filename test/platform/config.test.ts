import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, redactedConfig } from '../../src/platform/config.js';

describe('config', () => {
  it('has working defaults for an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      PORT: 3000,
      HOST: '0.0.0.0',
      DATA_DIR: './data',
      ROLE: 'all',
      LOG_LEVEL: 'info',
      QUEUE_PREFIX: 'pushd',
      EMBEDDED_PG_PORT: 54329,
      BODY_LIMIT_BYTES: 1048576,
      RATE_LIMIT_PER_SECOND: 5000,
      RATE_LIMIT_BURST: 10000,
      RATE_LIMIT_SDK_PER_SECOND: 10,
      RATE_LIMIT_SDK_BURST: 200,
    });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.REDIS_URL).toBeUndefined();
    expect(c.dataDir).toBe(path.resolve('./data'));
  });

  it('parses numbers and enums', () => {
    const c = loadConfig({
      PORT: '8080',
      ROLE: 'worker',
      LOG_LEVEL: 'debug',
      DATABASE_URL: 'postgres://u:p@db:5432/x',
      REDIS_URL: 'redis://r:6379',
    });
    expect(c).toMatchObject({
      PORT: 8080,
      ROLE: 'worker',
      LOG_LEVEL: 'debug',
      DATABASE_URL: 'postgres://u:p@db:5432/x',
      REDIS_URL: 'redis://r:6379',
    });
  });

  it('treats empty strings as unset', () => {
    const c = loadConfig({ PORT: '', DATABASE_URL: '', REDIS_URL: '', ROLE: '' });
    expect(c.PORT).toBe(3000);
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.ROLE).toBe('all');
  });

  it('takes a queue prefix in braces, a Redis Cluster hash tag', () => {
    expect(loadConfig({ QUEUE_PREFIX: '{pushd}' }).QUEUE_PREFIX).toBe('{pushd}');
  });

  it('on a Redis Cluster, defaults the queue prefix to a hash tag and refuses one without braces', () => {
    expect(loadConfig({}).QUEUE_PREFIX).toBe('pushd');
    const cluster = { REDIS_URL: 'redis://node-1:7000', REDIS_CLUSTER: 'true' };
    expect(loadConfig(cluster)).toMatchObject({ REDIS_CLUSTER: true, QUEUE_PREFIX: '{pushd}' });
    expect(loadConfig({ ...cluster, QUEUE_PREFIX: '{eu}' }).QUEUE_PREFIX).toBe('{eu}');
    expect(() => loadConfig({ ...cluster, QUEUE_PREFIX: 'eu' })).toThrow(
      /QUEUE_PREFIX: on a Redis Cluster it must be in braces \(\{eu\}\)/,
    );
    expect(() => loadConfig({ REDIS_CLUSTER: 'true' })).toThrow(/REDIS_CLUSTER: needs REDIS_URL/);
    expect(loadConfig({ REDIS_URL: 'redis://r:6379', REDIS_CLUSTER: 'false' }).REDIS_CLUSTER).toBe(false);
  });

  it('keeps one queue per job kind unless QUEUE_PARTITIONS asks for more', () => {
    expect(loadConfig({}).QUEUE_PARTITIONS).toBe(1);
    expect(loadConfig({ QUEUE_PARTITIONS: '6' }).QUEUE_PARTITIONS).toBe(6);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '3000.5'],
    ['ROLE', 'foo'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'localhost'],
    ['EMBEDDED_PG_PORT', '0'],
    ['QUEUE_PREFIX', 'has space'],
    ['QUEUE_PREFIX', '{unclosed'],
    ['QUEUE_PREFIX', 'a{b}'],
    ['REDIS_CLUSTER', 'maybe'],
    ['QUEUE_PARTITIONS', '0'],
    ['QUEUE_PARTITIONS', '65'],
    ['SCHEDULE_POLL_MS', '0'],
    ['BODY_LIMIT_BYTES', '10'],
    ['DELIVERY_CONCURRENCY', '0'],
    ['RATE_LIMIT_PER_SECOND', '-1'],
    ['RATE_LIMIT_BURST', '0'],
    ['RATE_LIMIT_SDK_PER_SECOND', 'fast'],
    ['RATE_LIMIT_SDK_BURST', '2.5'],
  ])('%s=%s stops start-up naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^invalid configuration: .*\\b${name}: `));
  });

  it('keeps receipts for the conversion window plus 7 days of late reports, and refuses less', () => {
    expect(loadConfig({})).toMatchObject({ RETENTION_RECEIPTS_DAYS: 8, RETENTION_ACTIVE_DEVICES_DAYS: 8 });
    expect(loadConfig({ CONVERSION_WINDOW_HOURS: '49' }).RETENTION_RECEIPTS_DAYS).toBe(10);
    expect(loadConfig({ RETENTION_RECEIPTS_DAYS: '30', RETENTION_ACTIVE_DEVICES_DAYS: '14' })).toMatchObject({
      RETENTION_RECEIPTS_DAYS: 30,
      RETENTION_ACTIVE_DEVICES_DAYS: 14,
    });
    expect(() => loadConfig({ CONVERSION_WINDOW_HOURS: '72', RETENTION_RECEIPTS_DAYS: '9' })).toThrow(
      /RETENTION_RECEIPTS_DAYS: must be at least 10 \(CONVERSION_WINDOW_HOURS plus the 7 days/,
    );
    expect(() => loadConfig({ RETENTION_ACTIVE_DEVICES_DAYS: '7' })).toThrow(/RETENTION_ACTIVE_DEVICES_DAYS/);
  });

  it('holds webhook events 5 minutes a claim, and refuses a lease shorter than twice the timeout', () => {
    expect(loadConfig({})).toMatchObject({ WEBHOOK_LEASE_MS: 300_000, WEBHOOK_TIMEOUT_MS: 10_000 });
    expect(loadConfig({ WEBHOOK_LEASE_MS: '3000', WEBHOOK_TIMEOUT_MS: '1500' }).WEBHOOK_LEASE_MS).toBe(3000);
    expect(() => loadConfig({ WEBHOOK_LEASE_MS: '3000' })).toThrow(/WEBHOOK_LEASE_MS: must be at least twice WEBHOOK_TIMEOUT_MS/);
    expect(() => loadConfig({ WEBHOOK_LEASE_MS: '999' })).toThrow(/WEBHOOK_LEASE_MS: /);
  });

  it('keeps opens and conversions 90 days and sessions 8, and refuses less than a late report needs', () => {
    expect(loadConfig({})).toMatchObject({ RETENTION_ACTIVITY_DAYS: 90, RETENTION_SESSIONS_DAYS: 8 });
    expect(loadConfig({ RETENTION_ACTIVITY_DAYS: '8', RETENTION_SESSIONS_DAYS: '30' })).toMatchObject({
      RETENTION_ACTIVITY_DAYS: 8,
      RETENTION_SESSIONS_DAYS: 30,
    });
    expect(() => loadConfig({ RETENTION_ACTIVITY_DAYS: '7' })).toThrow(/RETENTION_ACTIVITY_DAYS/);
    expect(() => loadConfig({ RETENTION_SESSIONS_DAYS: '7' })).toThrow(/RETENTION_SESSIONS_DAYS/);
  });

  it('names every bad variable at once', () => {
    expect(() => loadConfig({ PORT: 'abc', ROLE: 'foo' })).toThrow(/PORT: .*; ROLE: /);
  });

  it('masks URL passwords in the loggable config', () => {
    const c = loadConfig({ DATABASE_URL: 'postgres://app:s3cret-pw@db:5432/pushd', REDIS_URL: 'redis://:r3dis-pw@cache:6379/0' });
    const shown = redactedConfig(c);
    expect(shown.DATABASE_URL).toBe('postgres://app:***@db:5432/pushd');
    expect(shown.REDIS_URL).toBe('redis://:***@cache:6379/0');
    expect(JSON.stringify(shown)).not.toMatch(/s3cret-pw|r3dis-pw/);
  });

  it('masks the passwords of the listen and replica URLs, and reads READ_MAX_LAG_SECONDS (10 by default)', () => {
    const c = loadConfig({
      DATABASE_URL: 'postgres://app:pw@bouncer:6432/pushd',
      DATABASE_LISTEN_URL: 'postgres://app:l1sten-pw@db:5432/pushd',
      DATABASE_READ_URL: 'postgres://app:repl1ca-pw@replica:5432/pushd',
    });
    expect(c.READ_MAX_LAG_SECONDS).toBe(10);
    const shown = redactedConfig(c);
    expect([shown.DATABASE_LISTEN_URL, shown.DATABASE_READ_URL]).toEqual([
      'postgres://app:***@db:5432/pushd',
      'postgres://app:***@replica:5432/pushd',
    ]);
    expect(JSON.stringify(shown)).not.toMatch(/l1sten-pw|repl1ca-pw/);
    expect(loadConfig({ READ_MAX_LAG_SECONDS: '2.5' }).READ_MAX_LAG_SECONDS).toBe(2.5);
    expect(() => loadConfig({ READ_MAX_LAG_SECONDS: '-1' })).toThrow(/READ_MAX_LAG_SECONDS: /);
  });

  it('leaves URLs without credentials as they are', () => {
    const shown = redactedConfig(loadConfig({ DATABASE_URL: 'postgres://db:5432/pushd' }));
    expect(shown.DATABASE_URL).toBe('postgres://db:5432/pushd');
  });
});
