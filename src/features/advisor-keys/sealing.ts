import type { SealedSecret, SecretSlot } from '../../platform/vault.ts';
import type { SealedColumns } from './repo.ts';

const asBuffer = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** The vault's view of a stored row (pg gives Buffers, PGlite Uint8Arrays). */
export function sealedOf(row: SealedColumns): SealedSecret {
  return { keyId: row.key_id, nonce: asBuffer(row.nonce), ciphertext: asBuffer(row.ciphertext), tag: asBuffer(row.tag) };
}

export function sealedColumns(sealed: SealedSecret): SealedColumns {
  return { key_id: sealed.keyId, nonce: sealed.nonce, ciphertext: sealed.ciphertext, tag: sealed.tag };
}

export const providerSlot = (userId: string, provider: string): SecretSlot => ({ userId, kind: 'provider', provider });
export const marketDataSlot = (userId: string, provider: string): SecretSlot => ({ userId, kind: 'market-data', provider });

/** DESIGN §5: the only plaintext-derived value stored beside the ciphertext. */
export const hintTail = (apiKey: string): string => apiKey.slice(-4);
