import { expect } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { MessagesRepository } from '../../src/db/repositories/messages.js';
import type { Harness } from '../helpers/harness.js';
import { call } from './device-support.js';
import { ISO_MS, UUID } from './support.js';

/** HTTP helpers for the message tests: the app's side (write/read keys) and a device's stream (sdk key). */

export function postMessage(h: Harness, key: string, message: unknown, headers: Record<string, string> = {}) {
  return call(h, 'POST', '/v6/messages', key, { message }, headers);
}

/** Posts a message that must be created; answers its record. */
export async function createMessage(h: Harness, key: string, message: Record<string, unknown>) {
  const res = await postMessage(h, key, message);
  if (res.statusCode !== 201) throw new Error(`message create failed: ${res.statusCode} ${res.body}`);
  return res.json() as MessageAnswer;
}

export interface MessageAnswer {
  id: string;
  state: string;
  to: { id: string; type: string };
  notification_id: string | null;
  [field: string]: unknown;
}

/** The ids in a device's stream, newest first, and its unread count. */
export async function streamOf(h: Harness, sdkKey: string, deviceId: string) {
  const res = await call(h, 'GET', `/v6/devices/${deviceId}/messages?per=100`, sdkKey);
  if (res.statusCode !== 200) throw new Error(`stream read failed: ${res.statusCode} ${res.body}`);
  const body = res.json() as { messages: { id: string; read: boolean }[]; unread_count: number };
  return { ids: body.messages.map((m) => m.id), unread: body.unread_count, messages: body.messages };
}

/** Every field of a message record with its JSON type (the documented ones first). */
export function expectMessageRecord(record: unknown) {
  expect(record).toEqual({
    created_at: expect.stringMatching(ISO_MS),
    state: expect.stringMatching(/^(scheduled|published|unpublished|canceled)$/),
    id: expect.stringMatching(UUID),
    to: { id: expect.stringMatching(UUID), type: 'Audience' },
    message: expect.any(Object),
    notification_id: expect.toBeOneOf([null, expect.stringMatching(UUID)]),
    title: expect.any(String),
    text: expect.toBeOneOf([null, expect.any(String)]),
    url: expect.toBeOneOf([null, expect.any(String)]),
    type: expect.any(String),
    custom: expect.any(Object),
    send_at: expect.toBeOneOf([null, expect.stringMatching(ISO_MS)]),
    publish_at: expect.stringMatching(ISO_MS),
    unpublish_at: expect.toBeOneOf([null, expect.stringMatching(ISO_MS)]),
    expires_at: expect.stringMatching(ISO_MS),
    canceled_at: expect.toBeOneOf([null, expect.stringMatching(ISO_MS)]),
  });
}

/** Stores a message published at `published` and kept the default 90 days, as the repository does (no request). */
export function insertMessage(db: Db, m: { appId: string; audienceId: string; published: Date; resolved: boolean }) {
  return new MessagesRepository().insert(db, {
    appId: m.appId,
    audienceId: m.audienceId,
    request: { title: 't' },
    title: 't',
    text: null,
    url: null,
    type: 'default',
    custom: {},
    timing: { sendAt: null, publishAt: m.published, unpublishAt: null, expiresAt: new Date(m.published.getTime() + 90 * 86_400_000) },
    createdAt: m.published,
    resolved: m.resolved,
  });
}
