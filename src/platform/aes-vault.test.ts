import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { createVault, loadOrCreateKeyring, loadOrCreateSecret, parseKeyring, type Keyring } from './aes-vault.ts';
import { VaultError, type SealedSecret, type SecretSlot } from './vault.ts';

const keyA = randomBytes(32);
const keyB = randomBytes(32);
const ring = (...keys: [string, Buffer][]): Keyring => ({ keys: keys.map(([id, key]) => ({ id, key })) });
const vault = createVault(ring(['a', keyA]));
const slot: SecretSlot = { userId: 'user-1', kind: 'provider', provider: 'openai' };
const secret = 'sk-live-0123456789abcdef';

const slotArb = fc.record({
  userId: fc.string({ unit: 'binary', minLength: 1, maxLength: 128 }),
  kind: fc.constantFrom('provider' as const, 'market-data' as const),
  provider: fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }),
});

function flipBit(buf: Buffer, bit: number): Buffer {
  const copy = Buffer.from(buf);
  copy[bit >> 3] = (copy[bit >> 3] ?? 0) ^ (1 << (bit & 7));
  return copy;
}

function assertRefused(sealed: SealedSecret, at: SecretSlot = slot, v = vault): void {
  assert.throws(
    () => v.open(sealed, at),
    (err: unknown) => {
      assert.ok(err instanceof VaultError);
      assert.ok(!err.message.includes(secret), 'message must not contain the plaintext');
      assert.ok(!err.message.includes(keyA.toString('base64')), 'message must not contain key material');
      return true;
    },
  );
}

describe('DESIGN §5: AES-256-GCM vault', () => {
  test('round trip: any unicode plaintext opens in the slot it was sealed for', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), slotArb, (plaintext, s) => {
        assert.equal(vault.open(vault.seal(plaintext, s), s), plaintext);
      }),
    );
  });

  test('a fresh 96-bit nonce per seal: sealing twice gives different nonces and ciphertexts', () => {
    const one = vault.seal(secret, slot);
    const two = vault.seal(secret, slot);
    assert.equal(one.nonce.length, 12);
    assert.equal(one.tag.length, 16);
    assert.notDeepEqual(one.nonce, two.nonce);
    assert.notDeepEqual(one.ciphertext, two.ciphertext);
  });

  test("a ciphertext moved to another user's, kind's or provider's slot fails", () => {
    const sealed = vault.seal(secret, slot);
    assertRefused(sealed, { ...slot, userId: 'user-2' });
    assertRefused(sealed, { ...slot, kind: 'market-data' });
    assertRefused(sealed, { ...slot, provider: 'anthropic' });
  });

  test('slot binding is unambiguous: any two different slots refuse each other', () => {
    fc.assert(
      fc.property(slotArb, slotArb, (s1, s2) => {
        fc.pre(s1.userId !== s2.userId || s1.kind !== s2.kind || s1.provider !== s2.provider);
        assertRefused(vault.seal('k', s1), s2);
      }),
    );
    // The pair a delimiter-joined encoding would confuse.
    assertRefused(vault.seal('k', { userId: 'a:b', kind: 'provider', provider: 'c' }), { userId: 'a', kind: 'provider', provider: 'b:c' });
  });

  test('every single-bit flip of nonce, ciphertext and tag fails', () => {
    const sealed = vault.seal('sk-1', slot);
    let tried = 0;
    for (const part of ['nonce', 'ciphertext', 'tag'] as const) {
      for (let bit = 0; bit < sealed[part].length * 8; bit++) {
        assertRefused({ ...sealed, [part]: flipBit(sealed[part], bit) });
        tried++;
      }
    }
    assert.equal(tried, (12 + 4 + 16) * 8);
  });

  test('a truncated tag fails, even the 12-byte tag GCM itself would accept', () => {
    const sealed = vault.seal(secret, slot);
    for (const length of [0, 4, 8, 12, 15]) assertRefused({ ...sealed, tag: sealed.tag.subarray(0, length) });
    assertRefused({ ...sealed, tag: Buffer.concat([sealed.tag, Buffer.alloc(1)]) });
  });

  test('an unknown key id fails', () => {
    assertRefused({ ...vault.seal(secret, slot), keyId: 'gone' });
  });

  test('the key id is bound too: relabelling a ciphertext with another known key id fails', () => {
    const both = createVault(ring(['a', keyA], ['b', keyA]));
    assertRefused({ ...both.seal(secret, slot), keyId: 'b' }, slot, both);
  });

  test('rotation: with a new key in front, old ciphertexts open and new seals use the new key id', () => {
    const old = vault.seal(secret, slot);
    const rotated = createVault(ring(['b', keyB], ['a', keyA]));
    assert.equal(rotated.primaryKeyId, 'b');
    assert.equal(rotated.open(old, slot), secret);
    const fresh = rotated.seal(secret, slot);
    assert.equal(fresh.keyId, 'b');
    assert.equal(rotated.open(fresh, slot), secret);
    assertRefused(fresh, slot, vault); // the old keyring cannot read the new key's ciphertexts
  });

  test('derived keys (HKDF): deterministic per key id and purpose, distinct from the sealing key and from each other', () => {
    const again = createVault(ring(['a', keyA]));
    const raw = (v: typeof vault, purpose: string, id?: string) => v.derivedKey(purpose, id)?.key.export();
    assert.deepEqual(raw(vault, 'page-cursor/1'), raw(again, 'page-cursor/1'));
    assert.equal(vault.derivedKey('page-cursor/1')?.keyId, 'a');
    assert.notDeepEqual(raw(vault, 'page-cursor/1'), keyA);
    assert.notDeepEqual(raw(vault, 'page-cursor/1'), raw(vault, 'something-else'));
    const rotated = createVault(ring(['b', keyB], ['a', keyA]));
    assert.equal(rotated.derivedKey('page-cursor/1')?.keyId, 'b');
    assert.deepEqual(raw(rotated, 'page-cursor/1', 'a'), raw(vault, 'page-cursor/1'));
    assert.equal(vault.derivedKey('page-cursor/1', 'b'), undefined);
  });

  test('a plaintext that is not well-formed Unicode is refused rather than silently altered', () => {
    assert.throws(() => vault.seal('sk-\ud800', slot), VaultError);
  });
});

describe('DESIGN §1: ENCRYPTION_KEYS keyring', () => {
  const b64 = keyA.toString('base64');

  test('parses ID:BASE64KEY entries in order, first one encrypting', () => {
    const parsed = parseKeyring(`new:${keyB.toString('base64')}, old-1:${b64}`);
    assert.deepEqual(
      parsed.keys.map((k) => k.id),
      ['new', 'old-1'],
    );
    assert.deepEqual(parsed.keys[1]?.key, keyA);
    assert.equal(createVault(parsed).primaryKeyId, 'new');
  });

  test('bad specs throw a message naming ENCRYPTION_KEYS and never the key', () => {
    const bad = [
      '',
      b64, // id forgotten
      `:${b64}`,
      `bad id:${b64}`,
      `${'x'.repeat(33)}:${b64}`,
      `a:${randomBytes(16).toString('base64')}`, // 16-byte key
      `a:${randomBytes(33).toString('base64')}`,
      `a:${b64.slice(0, -1)}!`,
      `a:${b64},a:${keyB.toString('base64')}`, // duplicate id
      `a:${b64},`,
    ];
    for (const spec of bad) {
      assert.throws(
        () => parseKeyring(spec),
        (err: Error) => {
          assert.match(err.message, /ENCRYPTION_KEYS/, spec);
          assert.ok(!err.message.includes(b64.slice(0, 12)), `message leaks key material: ${err.message}`);
          return true;
        },
      );
    }
  });
});

describe('DESIGN §1: generated local secrets', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'vault-test-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  test('without ENCRYPTION_KEYS a keyring file is generated with mode 0600 (dir 0700), warned about, and reused', () => {
    const dir = path.join(root, 'data', 'nested');
    const warnings: string[] = [];
    const first = loadOrCreateKeyring(undefined, dir, (m) => warnings.push(m));
    const file = path.join(dir, 'encryption-keys');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.match(readFileSync(file, 'utf8'), /^local1:[A-Za-z0-9+/]{43}=\n$/);
    assert.equal(first.keys[0]?.id, 'local1');
    assert.match(warnings.join('\n'), /ENCRYPTION_KEYS.*LOCAL USE ONLY/s);

    const second = loadOrCreateKeyring(undefined, dir, () => undefined);
    assert.deepEqual(second.keys[0]?.key, first.keys[0]?.key);
  });

  test('with ENCRYPTION_KEYS set no file is written', () => {
    const dir = path.join(root, 'configured');
    const parsed = loadOrCreateKeyring(`k:${keyA.toString('base64')}`, dir, () => assert.fail('no warning expected'));
    assert.equal(parsed.keys[0]?.id, 'k');
    assert.throws(() => statSync(path.join(dir, 'encryption-keys')), { code: 'ENOENT' });
  });

  test('a corrupt keyring file is reported by name', () => {
    const dir = path.join(root, 'corrupt');
    loadOrCreateKeyring(undefined, dir, () => undefined);
    writeFileSync(path.join(dir, 'encryption-keys'), 'nonsense');
    assert.throws(() => loadOrCreateKeyring(undefined, dir, () => undefined), /encryption-keys.*ENCRYPTION_KEYS/);
  });

  test('the JWT secret is 48 random bytes base64url in a 0600 file, reused on the next start', () => {
    const dir = path.join(root, 'jwt');
    const warnings: string[] = [];
    const secretA = loadOrCreateSecret('jwt-secret', dir, (m) => warnings.push(m));
    assert.match(secretA, /^[A-Za-z0-9_-]{64}$/);
    assert.equal(statSync(path.join(dir, 'jwt-secret')).mode & 0o777, 0o600);
    assert.match(warnings.join('\n'), /AUTH_JWT_SECRET/);
    assert.equal(
      loadOrCreateSecret('jwt-secret', dir, () => undefined),
      secretA,
    );
  });
});
