import type { Clock } from './clock.ts';
import { assertRule, windowDecision, type RateLimiter } from './rate-limiter.ts';

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
