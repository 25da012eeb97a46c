import { describe, expect, it } from 'vitest';
import { notificationRequestSchema, targetOf } from '../../src/domain/notification-request.js';

const parse = (body: unknown) => notificationRequestSchema.safeParse(body);
const firstIssue = (body: unknown) => {
  const r = parse(body);
  if (r.success) throw new Error('expected a failure');
  const i = r.error.issues[0]!;
  return { path: i.path.join('.'), message: i.message };
};

describe('notification request', () => {
  it('maps the three to forms to targets', () => {
    expect(targetOf('*')).toEqual({ kind: 'all' });
    expect(targetOf({ audience: 'a1' })).toEqual({ kind: 'audience', audienceId: 'a1' });
    const filters = [{ name: 'locale', criteria: ['fr_FR'] }];
    expect(targetOf(filters)).toEqual({ kind: 'filters', filters });
  });

  it('parses each form and keeps the payload as sent', () => {
    for (const to of ['*', { audience: 'x' }, [{ name: 'locale', criteria: ['fr_FR'], not_filter: true }]]) {
      const payload = { alert: 'a', custom: { deep: [1, { two: 2 }] } };
      const r = parse({ notification: { to, payload } });
      expect(r.success).toBe(true);
      expect(r.data).toStrictEqual({ notification: { to, payload } });
    }
  });

  it('names the path of a bad filter deep in the array', () => {
    expect(
      firstIssue({
        notification: {
          to: [
            { name: 'locale', criteria: ['x'] },
            { name: 'badge', criteria: ['y'] },
          ],
          payload: { alert: 'a' },
        },
      }),
    ).toEqual({
      path: 'notification.to.1.criteria.0',
      message: 'must be a number or a range object',
    });
  });

  it('an unknown key inside notification is named as such, not as a wrong type', () => {
    expect(firstIssue({ notification: { to: '*', payload: { alert: 'a' }, when: 'now' } })).toEqual({
      path: 'notification',
      message: 'Unrecognized key: "when"',
    });
    expect(firstIssue({ notification: 'x' })).toEqual({ path: 'notification', message: 'must be an object with to and payload' });
  });

  it('refuses an unknown envelope key', () => {
    expect(firstIssue({ notification: { to: '*', payload: { alert: 'a' } }, extra: 1 }).message).toBe('Unrecognized key: "extra"');
  });
});
