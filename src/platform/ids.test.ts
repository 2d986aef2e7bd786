import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomToken, secureRandomBytes, uuidv7 } from './ids.ts';

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

test("a returned buffer is the caller's own: later draws do not change it", () => {
  const a = secureRandomBytes(16);
  const copy = Buffer.from(a);
  for (let i = 0; i < 1000; i++) secureRandomBytes(16);
  assert.deepEqual(a, copy);
});

test('randomToken is base64url of the requested byte count', () => {
  assert.match(randomToken(), /^[A-Za-z0-9_-]{16}$/);
  assert.match(randomToken(16), /^[A-Za-z0-9_-]{22}$/);
});

test('row ids are RFC 9562 UUIDv7: version 7, variant 10, the millisecond in the first 48 bits, ordered by it, never repeated', () => {
  const at = Date.UTC(2026, 10, 21, 12, 0, 0, 123);
  const id = uuidv7(at);
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(parseInt(id.replaceAll('-', '').slice(0, 12), 16), at);
  const ids = Array.from({ length: 2000 }, (_, i) => uuidv7(at + i));
  assert.deepEqual([...ids].sort(), ids);
  const sameMs = new Set(Array.from({ length: 5000 }, () => uuidv7(at)));
  assert.equal(sameMs.size, 5000);
});
