import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { VaultError, type SealedSecret, type SecretSlot, type Vault } from './vault.ts';
import { secureRandomBytes } from './ids.ts';

/** The first key encrypts; every key decrypts (DESIGN §5 rotation). */
export interface Keyring {
  readonly keys: readonly { readonly id: string; readonly key: Buffer }[];
}

const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
// Versioned so a future change of the encoding can never be confused with this one.
const AAD_VERSION = 'advisor-vault/1';

/**
 * Associated data binds a ciphertext to its key id and slot. A JSON array of strings is an
 * unambiguous encoding: ('a:b', 'c') and ('a', 'b:c') give different bytes.
 */
function associatedData(keyId: string, slot: SecretSlot): Buffer {
  return Buffer.from(JSON.stringify([AAD_VERSION, keyId, slot.userId, slot.kind, slot.provider]), 'utf8');
}

export function createVault(keyring: Keyring): Vault {
  const primary = keyring.keys[0];
  if (!primary) throw new Error('keyring is empty');
  // KeyObjects, imported once: handing createCipheriv a raw Buffer re-imports the key on every
  // call, which costs several times the encryption of a short secret.
  const keys = new Map<string, KeyObject>();
  for (const { id, key } of keyring.keys) {
    if (key.length !== KEY_BYTES) throw new Error(`key "${id}" must be ${KEY_BYTES} bytes`);
    if (keys.has(id)) throw new Error(`key id "${id}" appears twice`);
    keys.set(id, createSecretKey(key));
  }
  const primaryKey = keys.get(primary.id);
  if (!primaryKey) throw new Error('keyring is empty');
  const derived = new Map<string, KeyObject>();

  return {
    primaryKeyId: primary.id,

    seal(plaintext, slot) {
      // Lone surrogates would be silently replaced by U+FFFD; refuse rather than store a different key.
      if (!plaintext.isWellFormed()) throw new VaultError('plaintext is not well-formed Unicode');
      const nonce = secureRandomBytes(NONCE_BYTES);
      const cipher = createCipheriv(ALGORITHM, primaryKey, nonce, { authTagLength: TAG_BYTES });
      cipher.setAAD(associatedData(primary.id, slot));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return { keyId: primary.id, nonce, ciphertext, tag: cipher.getAuthTag() };
    },

    open(sealed: SealedSecret, slot) {
      const key = keys.get(sealed.keyId);
      if (!key) throw new VaultError('ciphertext was sealed with a key id that is not in the keyring');
      if (sealed.nonce.length !== NONCE_BYTES) throw new VaultError('nonce has the wrong length');
      // GCM accepts shorter tags; checking the length ourselves stops a truncated tag from
      // weakening authentication.
      if (sealed.tag.length !== TAG_BYTES) throw new VaultError('authentication tag has the wrong length');
      const decipher = createDecipheriv(ALGORITHM, key, sealed.nonce, { authTagLength: TAG_BYTES });
      decipher.setAAD(associatedData(sealed.keyId, slot));
      decipher.setAuthTag(sealed.tag);
      try {
        return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]).toString('utf8');
      } catch {
        // The cause says nothing useful and must not leak; one message for every forgery.
        throw new VaultError('ciphertext failed authentication (wrong slot, key or tampered data)');
      }
    },

    derivedKey(purpose, keyId = primary.id) {
      const key = keys.get(keyId);
      if (!key) return undefined;
      const name = JSON.stringify([keyId, purpose]);
      let made = derived.get(name);
      if (made === undefined) {
        made = createSecretKey(Buffer.from(hkdfSync('sha256', key, DERIVE_SALT, `${DERIVE_INFO}${purpose}`, KEY_BYTES)));
        derived.set(name, made);
      }
      return { keyId, key: made };
    },
  };
}

// HKDF's salt and info prefix name this service's derivations, so a derived key matches no other use
// of the same keyring key.
const DERIVE_SALT = 'advisor-vault/derive/1';
const DERIVE_INFO = 'advisor-vault/purpose:';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Parses `ID:BASE64KEY[,ID:BASE64KEY…]`. Messages name the entry by position and (valid) id only,
 * never by its text, which could be key material typed in the wrong place.
 */
export function parseKeyring(spec: string): Keyring {
  const entries = spec.split(',').map((e) => e.trim());
  if (spec.trim() === '') throw new Error('ENCRYPTION_KEYS is empty; expected ID:BASE64KEY[,ID:BASE64KEY…]');
  const keys: { id: string; key: Buffer }[] = [];
  entries.forEach((entry, i) => {
    const where = `ENCRYPTION_KEYS entry ${i + 1}`;
    const colon = entry.indexOf(':');
    if (colon < 0) throw new Error(`${where} is not of the form ID:BASE64KEY`);
    const id = entry.slice(0, colon);
    const encoded = entry.slice(colon + 1);
    if (!KEY_ID.test(id)) throw new Error(`${where}: key id must be 1-32 characters of A-Z a-z 0-9 _ -`);
    if (!BASE64.test(encoded)) throw new Error(`${where} ("${id}"): key is not valid base64`);
    const key = Buffer.from(encoded, 'base64');
    if (key.length !== KEY_BYTES) {
      throw new Error(`${where} ("${id}"): key must decode to ${KEY_BYTES} bytes, got ${key.length}`);
    }
    if (keys.some((k) => k.id === id)) throw new Error(`${where}: key id "${id}" appears twice`);
    keys.push({ id, key });
  });
  return { keys };
}

/**
 * Used when ENCRYPTION_KEYS is unset: a keyring generated once into `<dataDir>/encryption-keys`.
 */
export function loadOrCreateKeyring(spec: string | undefined, dataDir: string, warn: (msg: string) => void): Keyring {
  if (spec !== undefined) return parseKeyring(spec);
  const file = path.join(dataDir, 'encryption-keys');
  const text = loadOrCreateSecretFile(file, () => `local1:${randomBytes(KEY_BYTES).toString('base64')}\n`, warn, {
    variable: 'ENCRYPTION_KEYS',
    consequence: 'losing this file makes every stored key unreadable',
  });
  try {
    return parseKeyring(text.trim());
  } catch (err) {
    throw new Error(`${file} (read because ENCRYPTION_KEYS is unset): ${(err as Error).message}`, { cause: err });
  }
}

// Which setting replaces each generated secret, for the warning.
const SECRET_VARIABLES: Record<string, string> = { 'jwt-secret': 'AUTH_JWT_SECRET' };

/** A generated secret in `<dataDir>/<name>` (48 random bytes, base64url), e.g. `jwt-secret`. */
export function loadOrCreateSecret(name: string, dataDir: string, warn: (msg: string) => void): string {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new Error(`secret file name "${name}" is not a plain file name`);
  const file = path.join(dataDir, name);
  const text = loadOrCreateSecretFile(file, () => `${randomBytes(48).toString('base64url')}\n`, warn, {
    variable: SECRET_VARIABLES[name] ?? `the setting for ${name}`,
    consequence: 'anyone who can read it can forge what it protects',
  }).trim();
  if (text === '') throw new Error(`${file} is empty; delete it to generate a new one`);
  return text;
}

/**
 * Reads the file, or creates it with `generate()` when absent. The content is written to a private
 * temporary file and hard-linked into place, so the file appears complete or not at all, and two
 * processes starting together agree on one value (the loser of the link race reads the winner's).
 */
function loadOrCreateSecretFile(file: string, generate: () => string, warn: (msg: string) => void, about: { variable: string; consequence: string }): string {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const created = createIfAbsent(file, generate);
  const banner = `${about.variable} is not set: ${created ? 'generated' : 'using the generated'} ${file}.`;
  warn(`${banner} FOR LOCAL USE ONLY: ${about.consequence}; set ${about.variable} in production.`);
  if ((statSync(file).mode & 0o077) !== 0) warn(`${file} is readable by other users; chmod 600 it.`);
  return readFileSync(file, 'utf8');
}

/** True when this call created the file. */
function createIfAbsent(file: string, generate: () => string): boolean {
  try {
    statSync(file);
    return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, generate(), { mode: 0o600, flag: 'wx' });
  chmodSync(tmp, 0o600); // the mode above is filtered by the umask; make it exact
  try {
    linkSync(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return false;
  } finally {
    unlinkSync(tmp);
  }
}
