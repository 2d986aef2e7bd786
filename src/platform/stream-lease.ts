/**
 * One live stream per user (DESIGN §4). A lease is held by a random token and expires unless
 * renewed, so a crashed instance cannot block its user for longer than the ttl.
 */
export interface StreamLeases {
  /** Returns a token when the user had no live lease, else null. */
  acquire(userId: string, ttlMs: number): Promise<string | null>;
  /**
   * Extends the lease, re-creating it when it was lost and nobody took it meanwhile (it expired, or
   * the store restarted empty); false only when another holder has it.
   */
  renew(userId: string, token: string, ttlMs: number): Promise<boolean>;
  /** Releases only the lease this token holds. */
  release(userId: string, token: string): Promise<void>;
  close(): Promise<void>;
}
