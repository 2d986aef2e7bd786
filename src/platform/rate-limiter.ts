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

/** What a store reports after one atomic check-and-record; shared by every implementation. */
export interface WindowState {
  readonly allowed: boolean;
  /** Hits in the window after this one (this one included when allowed). */
  readonly count: number;
  /** Oldest and newest hit still in the window (ms since epoch); null when empty. */
  readonly oldestMs: number | null;
  readonly newestMs: number | null;
}

/** Turns a store's window state into the decision every implementation returns identically. */
export function windowDecision(rule: RateLimitRule, nowMs: number, state: WindowState): RateLimitDecision {
  const resetMs = state.newestMs === null ? 0 : Math.max(0, state.newestMs + rule.windowMs - nowMs);
  if (state.allowed) {
    return { allowed: true, limit: rule.limit, remaining: Math.max(0, rule.limit - state.count), retryAfterMs: 0, resetMs };
  }
  // The oldest hit leaving the window is what frees a slot.
  const retryAfterMs = state.oldestMs === null ? rule.windowMs : Math.max(1, state.oldestMs + rule.windowMs - nowMs);
  return { allowed: false, limit: rule.limit, remaining: 0, retryAfterMs, resetMs };
}

/** Rules are code, not input; a bad one is a programming error worth failing loudly on. */
export function assertRule(rule: RateLimitRule): void {
  if (!Number.isInteger(rule.limit) || rule.limit < 1) throw new Error(`rate limit rule ${rule.name}: limit must be a positive integer`);
  if (!Number.isInteger(rule.windowMs) || rule.windowMs < 1) throw new Error(`rate limit rule ${rule.name}: windowMs must be a positive integer`);
}
