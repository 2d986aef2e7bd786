import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomToken, secureRandomBytes } from './ids.ts';

test('pooled random bytes: the requested length, never repeated across pool refills, and not all zero', () => {
  const seen = new Set<string>();
  // 5,000 × 12 bytes crosses the 4 KiB pool about 15 times, with draws straddling each refill.
  for (let i = 0; i < 5000; i++) {
    const b = secureRandomBytes(12);
    assert.equal(b.length, 12);
    seen.add(b.toString('hex'));
  }
  assert.equal(seen.size, 5000);
  assert.ok([...seen].every((hex) => hex !== '0'.repeat(24)));
  for (const n of [1, 255, 256, 257, 5000]) assert.equal(secureRandomBytes(n).length, n);
});

test('a returned buffer is the caller\'s own: later draws do not change it', () => {
  const a = secureRandomBytes(16);
  const copy = Buffer.from(a);
  for (let i = 0; i < 1000; i++) secureRandomBytes(16);
  assert.deepEqual(a, copy);
});

test('randomToken is base64url of the requested byte count', () => {
  assert.match(randomToken(), /^[A-Za-z0-9_-]{16}$/);
  assert.match(randomToken(16), /^[A-Za-z0-9_-]{22}$/);
});
