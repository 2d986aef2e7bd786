import type { KeyObject } from 'node:crypto';

/** The slot a ciphertext belongs to; bound into the AES-GCM associated data. */
export interface SecretSlot {
  readonly userId: string;
  readonly kind: 'provider' | 'market-data';
  /** Provider name (e.g. 'openai', 'polygon'). */
  readonly provider: string;
}

export interface SealedSecret {
  readonly keyId: string;
  readonly nonce: Buffer;
  readonly ciphertext: Buffer;
  readonly tag: Buffer;
}

export interface Vault {
  /** Id of the key that encrypts (the first of the keyring). */
  readonly primaryKeyId: string;
  seal(plaintext: string, slot: SecretSlot): SealedSecret;
  /** Throws VaultError when the key id is unknown or authentication fails. */
  open(sealed: SealedSecret, slot: SecretSlot): string;
  /**
   * A 32-byte key for `purpose` (e.g. page cursors), derived with HKDF-SHA256 from the keyring key
   * `keyId` (default: the primary): the keyring's rotation applies to it, yet it is a key of its own,
   * so nothing made with it spends the sealing key's nonces or can open or forge a sealed secret.
   * Undefined when `keyId` is not in the keyring.
   */
  derivedKey(purpose: string, keyId?: string): { readonly keyId: string; readonly key: KeyObject } | undefined;
}

export class VaultError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VaultError';
  }
}
