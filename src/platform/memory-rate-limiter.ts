import type { Clock } from './clock.ts';
import type { RateLimitDecision, RateLimiter, RateLimitRule } from './rate-limiter.ts';

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

interface Bucket {
  /** Hit times, ascending. */
  hits: number[];
  windowMs: number;
}

const SWEEP_EVERY = 1000;

/** Single-process limiter for the embedded default; exact because Node runs it on one thread. */
export function createMemoryRateLimiter(clock: Clock): RateLimiter {
  // Keyed by rule name, then subject, so no choice of names can make two buckets collide.
  const rules = new Map<string, Map<string, Bucket>>();
  let hitsSinceSweep = 0;

  function sweep(nowMs: number): void {
    for (const subjects of rules.values()) {
      for (const [subject, bucket] of subjects) {
        const newest = bucket.hits.at(-1);
        if (newest === undefined || newest <= nowMs - bucket.windowMs) subjects.delete(subject);
      }
    }
  }

  return {
    async hit(rule, subject) {
      assertRule(rule);
      const nowMs = clock.now().getTime();
      if (++hitsSinceSweep >= SWEEP_EVERY) {
        hitsSinceSweep = 0;
        sweep(nowMs);
      }
      let subjects = rules.get(rule.name);
      if (!subjects) rules.set(rule.name, (subjects = new Map()));
      let bucket = subjects.get(subject);
      if (!bucket) subjects.set(subject, (bucket = { hits: [], windowMs: rule.windowMs }));
      bucket.windowMs = rule.windowMs;

      const expired = bucket.hits.findIndex((t) => t > nowMs - rule.windowMs);
      bucket.hits.splice(0, expired < 0 ? bucket.hits.length : expired);
      const allowed = bucket.hits.length < rule.limit;
      if (allowed) {
        // Keep ascending order even if the clock was set back.
        const at = bucket.hits.findIndex((t) => t > nowMs);
        bucket.hits.splice(at < 0 ? bucket.hits.length : at, 0, nowMs);
      }
      return windowDecision(rule, nowMs, {
        allowed,
        count: bucket.hits.length,
        oldestMs: bucket.hits[0] ?? null,
        newestMs: bucket.hits.at(-1) ?? null,
      });
    },
    async close() {
      rules.clear();
    },
  };
}
