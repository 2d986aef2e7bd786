import type { Logger } from 'pino';
import type { Metrics } from './metrics.ts';
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

/** Past this share of MAX_OPEN_STREAMS a warning is logged (once per crossing; again after falling below REARM_SHARE). */
const WARN_SHARE = 0.8;
const REARM_SHARE = 0.75;

/**
 * DESIGN §16, admission before exhaustion: the stream connections this instance holds, at most `max`
 * (MAX_OPEN_STREAMS). A connection beyond it is refused while there are descriptors left to answer it.
 */
export class OpenStreams {
  #open = 0;
  #warned = false;
  readonly max: number;
  readonly #changed: (open: number) => void;
  readonly #warn: (open: number, max: number) => void;

  constructor(max: number, changed: (open: number) => void, warn: (open: number, max: number) => void) {
    this.max = max;
    this.#changed = changed;
    this.#warn = warn;
  }

  get open(): number {
    return this.#open;
  }

  /** A slot, as the function that gives it back (once, however often called); null when all are taken. */
  take(): (() => void) | null {
    if (this.#open >= this.max) return null;
    this.#open += 1;
    this.#changed(this.#open);
    if (!this.#warned && this.#open >= this.max * WARN_SHARE) {
      this.#warned = true;
      this.#warn(this.#open, this.max);
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#open -= 1;
      this.#changed(this.#open);
      if (this.#warned && this.#open < this.max * REARM_SHARE) this.#warned = false;
    };
  }
}

/** This app's OpenStreams: its count on the advisor_open_streams gauge, the warning in the log. */
export function openStreams(config: { readonly maxOpenStreams: number }, metrics: Metrics, logger: Logger): OpenStreams {
  metrics.maxOpenStreams.set(config.maxOpenStreams);
  return new OpenStreams(
    config.maxOpenStreams,
    (open) => metrics.openStreams.set(open),
    (open, max) =>
      logger.warn(
        { openStreams: open, maxOpenStreams: max },
        `${open} of MAX_OPEN_STREAMS (${max}) streams open: past 80 %, further ones are refused 503 at the limit`,
      ),
  );
}
