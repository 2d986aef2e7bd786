import type { Provider, TierConfig } from '../../catalogue.ts';
import { findModel } from '../../catalogue.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { rateLimitHeaders } from '../../http/rate-limit.ts';
import { userTier } from '../users/service.ts';
import { appendEntry, monthKey, monthStart, nextMonthStart } from './ledger.ts';
import * as repo from './repo.ts';

/** What a turn was charged at stream start; carried to settlement. */
export interface TurnCharge {
  readonly turnId: string;
  readonly userId: string;
  readonly source: 'allowance' | 'credits' | 'free';
  readonly credits: number;
  /** Images counted against the monthly image quota. */
  readonly images: number;
}

export interface TurnRequest {
  readonly turnId: string;
  readonly userId: string;
  readonly provider: Provider;
  readonly model: string;
  readonly images: number;
}

/**
 * The seam between the advisor stream and billing (DESIGN §8).
 * `reserve` decides and reserves atomically before the provider is called, or throws the refusal
 * (402 billing codes, 429 TIER_LIMIT_IMAGES). `settle` runs exactly once when the turn ends:
 * `produced` false (no delta reached the client) returns the credits, allowance turn and images.
 */
export interface TurnBilling {
  reserve(req: TurnRequest): Promise<TurnCharge>;
  settle(charge: TurnCharge, produced: boolean): Promise<void>;
}

/** Every turn free; stands in until the billing feature is configured into deps. */
export const freeTurnBilling: TurnBilling = {
  async reserve(req) {
    return { turnId: req.turnId, userId: req.userId, source: 'free', credits: 0, images: req.images };
  },
  async settle() {},
};

export type BillingDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'logger' | 'metrics' | 'ids'>;

/** Turns paid with the monthly allowance, credits from the ledger, or nothing (zero-cost models). */
export function createTurnBilling(deps: BillingDeps): TurnBilling {
  return {
    reserve: (req) => reserveTurn(deps, req),
    async settle(charge, produced) {
      if (produced) await chargeTurn(deps, charge.turnId);
      else await returnTurn(deps, charge.turnId);
    },
  };
}

function imageQuotaExceeded(tier: TierConfig, used: number, now: Date): AppError {
  const resetsAt = nextMonthStart(now);
  const rule = { name: 'monthly-images', limit: tier.monthlyImages, windowMs: resetsAt.getTime() - monthStart(now).getTime() };
  const untilReset = resetsAt.getTime() - now.getTime();
  const headers = rateLimitHeaders(rule, {
    allowed: false,
    limit: tier.monthlyImages,
    remaining: Math.max(0, tier.monthlyImages - used),
    retryAfterMs: untilReset,
    resetMs: untilReset,
  });
  return new AppError('TIER_LIMIT_IMAGES', `the monthly image quota of your tier (${tier.monthlyImages}) would be exceeded`, { headers });
}

async function reserveTurn(deps: BillingDeps, req: TurnRequest): Promise<TurnCharge> {
  const model = findModel(deps.config.catalogue, req.provider, req.model);
  if (!model) throw new AppError('MODEL_NOT_AVAILABLE', `model ${req.model} of ${req.provider} is not available`);
  if (!Number.isSafeInteger(req.images) || req.images < 0) throw new Error(`images must be a non-negative integer (got ${req.images})`);
  try {
    const tierName = await userTier(deps, req.userId);
    const tier = deps.config.catalogue.tiers[tierName];
    if (!tier) throw new Error(`tier ${tierName} is not in the catalogue`);
    const now = deps.clock.now();
    const month = monthKey(now);
    const cost = model.creditsPerTurn;
    return await deps.db.transaction().execute(async (trx) => {
      // Both rows stay locked until commit: the decision and its writes are one atomic step per user.
      const balance = await repo.lockWallet(trx, req.userId);
      const usage = await repo.lockUsage(trx, req.userId, month);
      if (req.images > 0 && usage.images + req.images > tier.monthlyImages) throw imageQuotaExceeded(tier, usage.images, now);
      const allowanceLeft = usage.allowanceTurns < tier.monthlyAllowanceTurns;
      // A negative balance (after a refund) never satisfies `balance >= cost`, so it blocks spending.
      const affordable = cost > 0 && balance >= cost;
      let source: TurnCharge['source'];
      if (model.allowance && allowanceLeft) source = 'allowance';
      else if (cost === 0) source = 'free';
      else if (affordable) source = 'credits';
      else if (model.allowance) throw new AppError('ALLOWANCE_EXHAUSTED', 'the monthly allowance and your credits are used up');
      else if (allowanceLeft) {
        throw new AppError('INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', 'not enough credits for this model; allowance turns remain for allowance models');
      } else throw new AppError('INSUFFICIENT_CREDITS', 'not enough credits for this model');

      const credits = source === 'credits' ? cost : 0;
      if (credits > 0) {
        const written = await appendEntry(trx, {
          id: deps.ids.uuid(),
          userId: req.userId,
          amount: -credits,
          kind: 'turn',
          reference: `turn:${req.turnId}`,
          now,
        });
        if (!written) throw new Error(`turn ${req.turnId} was already charged`);
      }
      const turns = source === 'allowance' ? 1 : 0;
      if (turns > 0 || req.images > 0) await repo.addUsage(trx, req.userId, month, turns, req.images);
      await repo.insertTurnCharge(trx, {
        turn_id: req.turnId,
        user_id: req.userId,
        source,
        credits,
        images: req.images,
        month,
        status: 'reserved',
        created_at: now,
        settled_at: null,
      });
      return { turnId: req.turnId, userId: req.userId, source, credits, images: req.images };
    });
  } catch (err) {
    if (err instanceof AppError) throw err;
    // Fail closed: a turn that cannot be recorded is not given away.
    deps.logger.error({ err, userId: req.userId, turnId: req.turnId }, 'billing store unavailable; turn refused');
    throw new AppError('BILLING_NOT_AVAILABLE', 'billing is not available right now; try again shortly');
  }
}

async function chargeTurn(deps: BillingDeps, turnId: string): Promise<void> {
  const row = await repo.finishTurnCharge(deps.db, turnId, 'charged', deps.clock.now());
  if (row) {
    if (row.credits > 0) deps.metrics.creditsSpent.inc(row.credits);
    return;
  }
  const existing = await repo.findTurnCharge(deps.db, turnId);
  if (existing?.status === 'returned') {
    // The sweeper took this reservation for a crashed turn; the turn is left free rather than charged twice.
    deps.logger.warn({ turnId }, 'turn produced output after its reservation was returned; not charged');
  }
}

/** Gives back what the turn reserved; false when it was already settled (idempotent). */
async function returnTurn(deps: BillingDeps, turnId: string): Promise<boolean> {
  const row = await repo.findTurnCharge(deps.db, turnId);
  if (!row || row.status !== 'reserved') return false;
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    await repo.lockWallet(trx, row.user_id);
    await repo.lockUsage(trx, row.user_id, row.month);
    const done = await repo.finishTurnCharge(trx, turnId, 'returned', now);
    if (!done) return false;
    if (done.credits > 0) {
      await appendEntry(trx, {
        id: deps.ids.uuid(),
        userId: done.user_id,
        amount: done.credits,
        kind: 'turn-return',
        reference: `turn-return:${turnId}`,
        now,
      });
    }
    const turns = done.source === 'allowance' ? 1 : 0;
    // Back to the month the turn was counted in, even if a new month has begun since.
    if (turns > 0 || done.images > 0) await repo.addUsage(trx, done.user_id, done.month, -turns, -done.images);
    return true;
  });
}

/**
 * Settles as not produced every reservation older than `olderThanMs` (its instance crashed before
 * settling). Returns how many were returned.
 */
export async function sweepStaleReservations(deps: BillingDeps, olderThanMs: number, batch = 500): Promise<number> {
  const before = new Date(deps.clock.now().getTime() - olderThanMs);
  let returned = 0;
  for (const turnId of await repo.staleReservations(deps.db, before, batch)) {
    if (await returnTurn(deps, turnId)) returned += 1;
  }
  if (returned > 0) deps.logger.warn({ returned }, 'returned stale turn reservations');
  return returned;
}
