import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { credentialHash, issueCredential } from '../../src/domain/device-credential.js';

describe('issueCredential', () => {
  it('answers 192 random bits each time, across refills of its pool, with the SHA-256 stored of each', () => {
    // 1,000 credentials draw the pool (170 a fill) six times over
    const issued = Array.from({ length: 1000 }, issueCredential);
    expect(new Set(issued.map((i) => i.credential)).size).toBe(1000);
    for (const { credential, hash } of issued) {
      expect(credential).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(hash.equals(createHash('sha256').update(credential, 'utf8').digest())).toBe(true);
    }
    // no run of bytes repeats between credentials either: each 8-character quarter is new
    const quarters = issued.flatMap((i) => [0, 8, 16, 24].map((k) => i.credential.slice(k, k + 8)));
    expect(new Set(quarters).size).toBe(quarters.length);
  });

  it("hashes a credential sent back as its text's UTF-8, a lone surrogate as U+FFFD", () => {
    for (const sent of ['abc', 'é😀', '\uD800x'])
      expect(credentialHash(sent).equals(createHash('sha256').update(sent, 'utf8').digest())).toBe(true);
  });
});
