import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Vault } from '../platform/vault.ts';
import { AppError } from './errors.ts';

/**
 * Opaque page cursors: `<keyId>.<payload>.<tag>`, the payload a base64url JSON array and the tag an
 * HMAC-SHA256 over (user, list, payload) under a key derived from the keyring for cursors alone — not
 * the key that seals provider keys, whose nonces pagination would otherwise spend, and which would
 * otherwise encrypt text a client chooses. A cursor the service did not make (edited, truncated,
 * another user's or another list's) fails the tag and is a 400, not a silently wrong page.
 */
export type CursorList = 'conversations' | 'messages' | 'ledger' | 'trades' | 'round-trips';

const PURPOSE = 'page-cursor/1';
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const TAG_BYTES = 32;

function tagOf(key: Parameters<typeof createHmac>[1], userId: string, list: CursorList, payload: string): Buffer {
  return createHmac('sha256', key)
    .update(JSON.stringify([userId, list, payload]))
    .digest();
}

export function makeCursor(vault: Vault, userId: string, list: CursorList, values: readonly (string | number)[]): string {
  const derived = vault.derivedKey(PURPOSE);
  if (derived === undefined) throw new Error('the keyring has no primary key');
  const payload = Buffer.from(JSON.stringify(values)).toString('base64url');
  return `${derived.keyId}.${payload}.${tagOf(derived.key, userId, list, payload).toString('base64url')}`;
}

export function invalidCursor(): AppError {
  return new AppError('VALIDATION_ERROR', 'cursor is not one this service produced', {
    details: [{ path: '/cursor', message: 'querystring cursor is invalid' }],
  });
}

/** The values of a cursor this service made for this user and list, or 400 VALIDATION_ERROR. */
export function readCursor(vault: Vault, userId: string, list: CursorList, cursor: string): unknown[] {
  const [keyId = '', payload = '', tag = '', ...rest] = cursor.split('.');
  if (rest.length > 0 || !KEY_ID.test(keyId) || !BASE64URL.test(payload) || !BASE64URL.test(tag)) throw invalidCursor();
  const derived = vault.derivedKey(PURPOSE, keyId);
  const given = Buffer.from(tag, 'base64url');
  if (derived === undefined || given.length !== TAG_BYTES || !timingSafeEqual(given, tagOf(derived.key, userId, list, payload))) {
    throw invalidCursor();
  }
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (!Array.isArray(values)) throw invalidCursor();
  return values;
}
