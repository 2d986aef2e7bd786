import type { RateLimitDecision, RateLimiter, RateLimitRule } from './rate-limiter.ts';
import type { StreamLeases } from './stream-lease.ts';

/** A stream request's admission: its rate-limit verdict and, when admitted, its claim on the user's stream lease. */
interface Admitted {
  readonly decision: RateLimitDecision;
  /** The lease's token; null when the rule refused the request (nothing taken) or another stream holds the lease. */
  readonly lease: string | null;
}

/**
 * DESIGN §4 at the start of a stream: the request counted under `rule` (every request counts) and, when
 * the rule admits it, the user's stream lease asked for — one step. On Redis it is one script, one round
 * trip (redis-admission.ts); elsewhere the two stores are asked in turn (`admitInTurn`).
 */
export interface Admission {
  admit(rule: RateLimitRule, userId: string, leaseTtlMs: number): Promise<Admitted>;
}

/** The limiter, then (only for an admitted request) the leases: the embedded and PostgreSQL stores, and leases a test wraps. */
export function admitInTurn(limiter: RateLimiter, leases: StreamLeases): Admission {
  return {
    async admit(rule, userId, leaseTtlMs) {
      const decision = await limiter.hit(rule, userId);
      return { decision, lease: decision.allowed ? await leases.acquire(userId, leaseTtlMs) : null };
    },
  };
}
