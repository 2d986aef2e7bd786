import { AppError } from '../../http/errors.ts';
import type { SecretSlot, Vault } from '../../platform/vault.ts';

/**
 * Opaque page cursors, sealed with the service's AES-GCM keyring: a cursor the service did not
 * produce (edited, truncated, another user's or another list's) fails authentication and is a
 * 400, not a silently wrong page. The slot names cannot collide with a stored key's slot.
 */
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const NONCE = 12;
const TAG = 16;

export type CursorKind = 'conversations' | 'messages';

const slot = (userId: string, kind: CursorKind): SecretSlot => ({ userId, kind: 'provider', provider: `cursor:${kind}` });

export function sealCursor(vault: Vault, userId: string, kind: CursorKind, payload: readonly (string | number)[]): string {
  const sealed = vault.seal(JSON.stringify(payload), slot(userId, kind));
  return `${sealed.keyId}.${Buffer.concat([sealed.nonce, sealed.tag, sealed.ciphertext]).toString('base64url')}`;
}

function invalidCursor(): AppError {
  return new AppError('VALIDATION_ERROR', 'cursor is not one this service produced', {
    details: [{ path: '/cursor', message: 'querystring cursor is invalid' }],
  });
}

/** The payload of a cursor this service sealed for this user and list, or 400 VALIDATION_ERROR. */
export function openCursor(vault: Vault, userId: string, kind: CursorKind, cursor: string): unknown[] {
  const dot = cursor.indexOf('.');
  const keyId = cursor.slice(0, dot);
  const body = cursor.slice(dot + 1);
  if (dot < 1 || !KEY_ID.test(keyId) || !/^[A-Za-z0-9_-]+$/.test(body)) throw invalidCursor();
  const bytes = Buffer.from(body, 'base64url');
  if (bytes.length <= NONCE + TAG) throw invalidCursor();
  let text: string;
  try {
    text = vault.open(
      { keyId, nonce: bytes.subarray(0, NONCE), tag: bytes.subarray(NONCE, NONCE + TAG), ciphertext: bytes.subarray(NONCE + TAG) },
      slot(userId, kind),
    );
  } catch {
    throw invalidCursor();
  }
  const payload: unknown = JSON.parse(text);
  if (!Array.isArray(payload)) throw invalidCursor();
  return payload;
}

export { invalidCursor };
