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
}

export class VaultError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VaultError';
  }
}
