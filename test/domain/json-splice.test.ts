import { describe, expect, it } from 'vitest';
import { contentsJson, splicer, textsThatDiffer } from '../../src/domain/json-splice.js';
import { toApnsRequest, toFcmMessage } from '../../src/domain/push-mapping.js';

const NID = '00000000-0000-4000-8000-000000000001';
const TRICKY = [
  'Hi Ana',
  '',
  'quote " and \\ backslash \\"',
  'unicode é ñ 中文 and \u2028 line \u2029 separators',
  'emoji 👋🏽 and a lone surrogate \ud800 x \udc00',
  'controls \u0000 \u0001 \b \f \n \r \t \u001f \u007f',
  '"\u0000pushd-text-0\u0000"',
  '</script><!-- {{ not }} -->',
];
const apns = (p: Record<string, unknown>) => JSON.stringify(toApnsRequest(p, NID, { priority: 'normal' }).body);
const fcm = (p: Record<string, unknown>) => JSON.stringify(toFcmMessage(p, NID, { now: new Date(0) }));

describe('contents spliced into one serialised skeleton', () => {
  const payloads = TRICKY.map((t, i) => ({ alert: `Hi ${t}`, title: TRICKY[TRICKY.length - 1 - i]!, badge: 1, ref: t, sound: 'a' }));

  it('writes the bytes of each content mapped and serialised whole, at APNs and FCM, whatever the texts', () => {
    expect(textsThatDiffer(payloads)).toEqual(['alert', 'title', 'ref']);
    for (const map of [apns, fcm]) {
      const { json, spliced } = contentsJson(payloads, map);
      expect(spliced).toBe(true);
      payloads.forEach((p, k) => expect(json(k)).toBe(map(p)));
    }
  });

  it('maps each content whole when they differ in more than texts: another value, key or key order', () => {
    const differing = [
      [...payloads.slice(0, 3), { ...payloads[3]!, badge: 2 }],
      [...payloads.slice(0, 3), { ...payloads[3]!, extra: 'x' }],
      [...payloads.slice(0, 3), { ref: 'r', alert: 'a', title: 't', badge: 1, sound: 'a' }],
      [...payloads.slice(0, 3), { ...payloads[3]!, alert: 5 }],
    ];
    for (const contents of differing) {
      expect(textsThatDiffer(contents)).toBeNull();
      const { json, spliced } = contentsJson(contents, apns);
      expect(spliced).toBe(false);
      contents.forEach((p, k) => expect(json(k)).toBe(apns(p)));
    }
  });

  it('uses no skeleton a mapping writes otherwise than the text itself', () => {
    const reversing = (p: Record<string, unknown>) => JSON.stringify({ a: [...String(p.alert)].reverse().join('') });
    expect(splicer(payloads, reversing)).toBeNull();
    const { json, spliced } = contentsJson(payloads, reversing);
    expect(spliced).toBe(false);
    expect(json(0)).toBe(reversing(payloads[0]!));
  });
});
