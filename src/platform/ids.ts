import { randomBytes, randomFillSync, randomUUID } from 'node:crypto';

export interface Ids {
  uuid(): string;
}

export const randomIds: Ids = { uuid: () => randomUUID() };

// Small random values (request ids, lease tokens, nonces) are cut from a buffer refilled from the
// CSPRNG 4 KiB at a time, as node:crypto's randomUUID does: one call into OpenSSL per ~300 values
// instead of one per value, which showed as 3% of a list request's CPU.
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafeSlow(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** `n` bytes from the CSPRNG (a copy the caller owns). */
export function secureRandomBytes(n: number): Buffer {
  if (n > 256) return randomBytes(n);
  if (poolOffset + n > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const out = Buffer.from(pool.subarray(poolOffset, poolOffset + n));
  // Bytes handed out are wiped from the pool, so no later reader of the buffer sees them.
  pool.fill(0, poolOffset, poolOffset + n);
  poolOffset += n;
  return out;
}

/** URL-safe random token, e.g. for request ids and lease tokens. */
export function randomToken(bytes = 12): string {
  return secureRandomBytes(bytes).toString('base64url');
}
