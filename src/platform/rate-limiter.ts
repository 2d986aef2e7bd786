/**
 * Exact rolling-window limits (DESIGN §4): no interval of `windowMs` ever admits more than `limit`
 * hits for one subject. A refused hit is not recorded, so a client hammering a 429 does not extend
 * its own wait.
 */
export interface RateLimitRule {
  /** Stable name, part of the storage key and of the RateLimit-Policy header. */
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
}

export interface RateLimitDecision {
  readonly allowed: boolean;
  readonly limit: number;
  /** Hits still admissible right now after this one. */
  readonly remaining: number;
  /** When refused: ms until a hit would be admitted. 0 when allowed. */
  readonly retryAfterMs: number;
  /** ms until the window is completely empty again (for the RateLimit header's `t`). */
  readonly resetMs: number;
}

export interface RateLimiter {
  /** Records one hit for `subject` under `rule` if admissible, atomically across instances. */
  hit(rule: RateLimitRule, subject: string): Promise<RateLimitDecision>;
  close(): Promise<void>;
}
