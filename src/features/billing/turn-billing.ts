import { setTimeout as sleep } from 'node:timers/promises';
import type { Provider, TierConfig } from '../../catalogue.ts';
import { findModel } from '../../catalogue.ts';
import { sql, type RawBuilder } from 'kysely';
import { isDatabaseUnavailable, pgErrorCode } from '../../db/create-db.ts';
import type { Cte } from '../../db/cte.ts';
import type { Db, Trx } from '../../db/types.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { rateLimitHeaders } from '../../http/rate-limit.ts';
import { isLive, liveSince, sweepableSince } from '../../platform/liveness.ts';
import { streamInProgress } from '../conversations/in-progress.ts';
import { appendEntry, monthKey, monthStart, nextMonthStart } from './ledger.ts';
import * as repo from './repo.ts';

/**
 * DESIGN §16: a turn's end is never given up. A closing statement that finds the database unreachable,
 * no free connection in the pool or its time out is tried again, backing off from SETTLE_RETRY_MS to
 * SETTLE_RETRY_MAX_MS, until it is stored; the turn keeps its lease and shows it is alive meanwhile,
 * and its frame log keeps the text. (An instance that dies meanwhile leaves it to the crash sweeper.)
 */
const SETTLE_RETRY_MS = 100;
const SETTLE_RETRY_MAX_MS = 5_000;

/** What a turn was charged at stream start; carried to settlement. */
export interface TurnCharge {
  readonly turnId: string;
  readonly userId: string;
  readonly source: 'allowance' | 'credits' | 'free';
  readonly credits: number;
  /** Images counted against the monthly image quota. */
  readonly images: number;
}

/** A reservation's request when the caller's statement chooses the model. */
type ChargeRequest = Omit<TurnRequest, 'provider' | 'model'>;

/** A reservation's request whose terms are the caller's statement's CTE `terms`: the chosen model's `(allowance boolean, cost bigint)`. */
interface ChargeWithinRequest extends ChargeRequest {
  readonly terms: Cte<'terms'>;
}

export interface TurnRequest {
  readonly turnId: string;
  readonly userId: string;
  readonly provider: Provider;
  readonly model: string;
  readonly images: number;
}

export type { ChargeRow } from './repo.ts';

/**
 * A caller's statement with billing's part in it: it runs on `db` and reads `part` — a query of at
 * most one row `(source, credits)` — exactly once, as a CTE, and returns that row.
 */
export type WithBillingPart<R = repo.ChargeRow | undefined> = (db: Db, part: RawBuilder<repo.ChargeRow>) => Promise<R>;

/** Billing's part of a turn's closing statement: at most one row `(source, credits)`, there when it charged the turn. */
export type SettlementPart = RawBuilder<repo.ChargeRow>;

/** A turn's closing statement with billing's settlement in it (its CTE read once); answers the settlement's row. */
export type ClosingStatement = (settlement: SettlementPart) => RawBuilder<repo.ChargeRow>;

/** A turn statement's row with billing's part in it: `source` and `credits` null when the part reserved nothing. */
interface WithCharge {
  readonly source: string | null;
  readonly credits: number | null;
}

/**
 * The seam between the advisor stream and billing (DESIGN §8).
 * `reserve` decides and reserves atomically before the provider is called, in one statement with the
 * caller's own rows for the turn (one round trip, one commit; both are stored or neither): billing's
 * part decides and reserves when `store` reads it, and yields how the turn is paid. Refusals are
 * thrown as AppErrors (402 billing codes, 429 TIER_LIMIT_IMAGES), an unreachable store as 402
 * BILLING_NOT_AVAILABLE; an error of the caller's own part reaches the caller unchanged and reserves
 * nothing. `settle` runs once when the turn ends, with the caller's closing statement: a produced
 * turn is charged by billing's part of it (one round trip, one commit); `produced` false (no delta
 * reached the client) stores the end, then returns the credits, allowance turn and images. Both are
 * idempotent, and a settlement the database could not take is tried again until it is stored.
 */
export interface TurnBilling {
  reserve(req: TurnRequest, store: WithBillingPart): Promise<TurnCharge>;
  /**
   * `reserve` for a turn whose model the caller's statement decides (one statement reads, decides and
   * stores a turn): billing's part reads the caller's CTE `req.terms` — the chosen model's catalogue terms
   * `(allowance boolean, cost bigint)` — and reserves nothing when it has no row (the caller refused
   * the turn); the statement's row carries the part's `source` and `credits`. Refusals and failures
   * as `reserve`'s; an AppError the caller's part raises reaches the caller unchanged.
   */
  reserveWithin<R extends WithCharge>(req: ChargeWithinRequest, store: WithBillingPart<R>): Promise<{ row: R; charge: TurnCharge | undefined }>;
  settle(charge: TurnCharge, produced: boolean, closing: ClosingStatement): Promise<void>;
}

type BillingDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'logger' | 'metrics' | 'ids'>;

/** Turns paid with the monthly allowance, credits from the ledger, or nothing (zero-cost models). */
export function createTurnBilling(deps: BillingDeps): TurnBilling {
  const tiers = tiersJson(deps.config.catalogue.tiers);
  return {
    reserve: (req, store) => reserveTurn(deps, tiers, req, store),
    async reserveWithin(req, store) {
      const row = await runReservation(deps, tiers, req, req.terms.ref, store);
      return { row, charge: row.source === null || row.credits === null ? undefined : chargeOf(req, row.source, row.credits) };
    },
    async settle(charge, produced, closing) {
      const statement = closing(produced ? repo.chargeQuery(charge.turnId, deps.clock.now()) : repo.noSettlement());
      // The client is told the turn ended only after this, so what it saw must be what is stored and
      // charged: a statement that lost its connection (a terminated backend, a failover) is tried again on
      // a fresh one. Each step is idempotent (the reply's update by id; a charge or return of a still-reserved turn).
      for (let wait = SETTLE_RETRY_MS; ; wait = Math.min(wait * 2, SETTLE_RETRY_MAX_MS)) {
        try {
          const { rows } = await statement.execute(deps.db);
          if (!produced) await returnTurn(deps, charge.turnId);
          else if (rows[0] === undefined) await chargeMissed(deps, charge.turnId);
          else if (rows[0].credits > 0) deps.metrics.creditsSpent.inc(rows[0].credits);
          return;
        } catch (err) {
          if (!isDatabaseUnavailable(err)) throw err;
          deps.metrics.settlementRetries.inc();
          deps.logger.warn({ err, turnId: charge.turnId, retryInMs: wait }, 'storing the end of a turn failed; trying again');
          await sleep(wait);
        }
      }
    },
  };
}

/** The catalogue's tiers as `reserve_turn` reads them (the limits only), serialised once. */
function tiersJson(tiers: Readonly<Record<string, TierConfig>>): string {
  return JSON.stringify(
    Object.fromEntries(Object.entries(tiers).map(([name, t]) => [name, { monthlyAllowanceTurns: t.monthlyAllowanceTurns, monthlyImages: t.monthlyImages }])),
  );
}

function imageQuotaExceeded(limit: number, used: number, now: Date): AppError {
  const resetsAt = nextMonthStart(now);
  const rule = { name: 'monthly-images', limit, windowMs: resetsAt.getTime() - monthStart(now).getTime() };
  const untilReset = resetsAt.getTime() - now.getTime();
  const headers = rateLimitHeaders(rule, {
    allowed: false,
    limit,
    remaining: Math.max(0, limit - used),
    retryAfterMs: untilReset,
    resetMs: untilReset,
  });
  return new AppError('TIER_LIMIT_IMAGES', `the monthly image quota of your tier (${limit}) would be exceeded`, { headers });
}

const REFUSALS = {
  ALLOWANCE_EXHAUSTED: 'the monthly allowance and your credits are used up',
  INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE: 'not enough credits for this model; allowance turns remain for allowance models',
  INSUFFICIENT_CREDITS: 'not enough credits for this model',
} as const;

/** The refusal `reserve_turn` raised (SQLSTATE BL409 / BL402 / BL429), as the client sees it; else undefined. */
function refusalOf(err: unknown, now: Date): AppError | undefined {
  const code = pgErrorCode(err);
  if (code === 'BL409' && err instanceof Error && err.message === 'STREAM_IN_PROGRESS') {
    return streamInProgress('user');
  }
  if ((code !== 'BL402' && code !== 'BL429') || !(err instanceof Error)) return undefined;
  if (code === 'BL429' && err.message === 'TIER_LIMIT_IMAGES') {
    const detail = 'detail' in err && typeof err.detail === 'string' ? /^limit=(\d+) used=(\d+)$/.exec(err.detail) : null;
    return detail ? imageQuotaExceeded(Number(detail[1]), Number(detail[2]), now) : undefined;
  }
  const refusal = err.message;
  return code === 'BL402' && isRefusal(refusal) ? new AppError(refusal, REFUSALS[refusal]) : undefined;
}

const isRefusal = (code: string): code is keyof typeof REFUSALS => Object.hasOwn(REFUSALS, code);

function chargeSource(source: string): TurnCharge['source'] {
  if (source === 'allowance' || source === 'credits' || source === 'free') return source;
  throw new Error(`reserve_turn returned an unknown source "${source}"`);
}

/**
 * The decision (DESIGN §8), made atomically by `reserve_turn` in one statement: image quota first,
 * then allowance model → allowance turn if any remain, else credits, else ALLOWANCE_EXHAUSTED; other
 * model → credits (free when it costs none), else INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE while
 * allowance turns remain, else INSUFFICIENT_CREDITS. `store` executes the reservation query inside the
 * caller's statement.
 */
async function reserveTurn(deps: BillingDeps, tiers: string, req: TurnRequest, store: WithBillingPart): Promise<TurnCharge> {
  const model = findModel(deps.config.catalogue, req.provider, req.model);
  if (!model) throw new AppError('MODEL_NOT_AVAILABLE', `model ${req.model} of ${req.provider} is not available`);
  const row = await runReservation(deps, tiers, req, repo.modelTerms(model.allowance, model.creditsPerTurn), store);
  if (!row) throw new Error('the turn statement returned no reservation');
  return chargeOf(req, row.source, row.credits);
}

function chargeOf(req: ChargeRequest, source: string, credits: number): TurnCharge {
  return { turnId: req.turnId, userId: req.userId, source: chargeSource(source), credits, images: req.images };
}

/** Runs `store` with the reservation on `terms` as billing's part; a refusal becomes the client's AppError, an unusable store 402 BILLING_NOT_AVAILABLE. */
async function runReservation<R>(deps: BillingDeps, tiers: string, req: ChargeRequest, terms: RawBuilder<unknown>, store: WithBillingPart<R>): Promise<R> {
  if (!Number.isSafeInteger(req.images) || req.images < 0) throw new Error(`images must be a non-negative integer (got ${req.images})`);
  const now = deps.clock.now();
  try {
    return await store(
      deps.db,
      repo.reservation({
        turnId: req.turnId,
        userId: req.userId,
        ledgerId: deps.ids.uuid(),
        now,
        month: monthKey(now),
        terms,
        images: req.images,
        tiers,
        defaultTier: deps.config.catalogue.defaultTier,
        liveSince: liveSince(now.getTime(), deps.config.streamHeartbeatMs),
      }),
    );
  } catch (err) {
    // The caller's own refusal, raised by its part of the statement.
    if (err instanceof AppError) throw err;
    const refusal = refusalOf(err, now);
    if (refusal) throw refusal;
    if (!failedInReservation(err)) throw err;
    // Fail closed: a turn that cannot be recorded is not given away.
    deps.logger.error({ err, userId: req.userId, turnId: req.turnId }, 'billing store unavailable; turn refused');
    throw new AppError('BILLING_NOT_AVAILABLE', 'billing is not available right now; try again shortly');
  }
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * Whether a caller's statement that read the reservation failed in billing's part: the store could
 * not be used at all (unreachable, connection lost, closed), or the error was raised inside
 * reserve_turn. Anything else is an error of the caller's own part (e.g. its unique index).
 */
function failedInReservation(err: unknown): boolean {
  const code = pgErrorCode(err);
  if (code === undefined || !SQLSTATE.test(code) || isDatabaseUnavailable(err)) return true;
  const where = err && typeof err === 'object' && 'where' in err && typeof err.where === 'string' ? err.where : '';
  return where.includes('reserve_turn(');
}

/** A closing statement with nothing of its own but billing's settlement (a turn settled without its caller's rows). */
export const settledAlone: ClosingStatement = (part) => sql<repo.ChargeRow>`with charge as materialized (${part}) select source, credits from charge`;

/** A turn statement with nothing of its own but billing's part (a turn reserved without its caller's rows). */
export const billingAlone: WithBillingPart = async (db, part) => (await settledAlone(part).execute(db)).rows[0];

/** Charges a reserved turn in its closing statement; false when it was not reserved any more. */
async function chargeTurn(deps: BillingDeps, turnId: string, closing: ClosingStatement): Promise<boolean> {
  const { rows } = await closing(repo.chargeQuery(turnId, deps.clock.now())).execute(deps.db);
  const row = rows[0];
  if (row === undefined) return chargeMissed(deps, turnId);
  if (row.credits > 0) deps.metrics.creditsSpent.inc(row.credits);
  return true;
}

/** A charge that found its turn no longer reserved (settled already): false, and a warning when the sweeper had returned it. */
async function chargeMissed(deps: BillingDeps, turnId: string): Promise<false> {
  const existing = await repo.findTurnCharge(deps.db, turnId);
  if (existing?.status === 'returned') {
    // The sweeper took this reservation for a crashed turn; the turn is left free rather than charged twice.
    deps.logger.warn({ turnId }, 'turn produced output after its reservation was returned; not charged');
  }
  return false;
}

/** Gives back what the turn reserved; false when it was already settled (idempotent). */
async function returnTurn(deps: BillingDeps, turnId: string): Promise<boolean> {
  const row = await repo.findTurnCharge(deps.db, turnId);
  if (!row || row.status !== 'reserved') return false;
  return deps.db.transaction().execute((trx) => giveBack(deps, trx, row, 'reserved'));
}

/**
 * DESIGN §7: a trader never pays twice because the service cut a turn. The charge of a turn the service
 * cut (ended SHUTTING_DOWN by a drain, or closed by the crash sweeper) is given back in `trx` — the
 * transaction that stores and reserves the message sent again in its place — credits, allowance turn and
 * images; false (nothing done) when it was not charged (returned already, or free). Once: the charge
 * moves from `charged` to `returned` and its ledger entry has the turn's unique reference.
 */
export async function refundCutTurn(deps: BillingDeps, trx: Trx, turnId: string): Promise<boolean> {
  const row = await repo.findTurnCharge(trx, turnId);
  if (row?.status !== 'charged') return false;
  return giveBack(deps, trx, row, 'charged');
}

/** What a turn reserved or was charged, given back in `trx` (wallet, then usage, locked in reserve_turn's order). */
async function giveBack(deps: BillingDeps, trx: Trx, row: repo.TurnChargeRow, from: 'reserved' | 'charged'): Promise<boolean> {
  const turnId = row.turn_id;
  const now = deps.clock.now();
  await repo.lockWallet(trx, row.user_id);
  await repo.lockUsage(trx, row.user_id, row.month);
  const done = await repo.finishTurnCharge(trx, turnId, 'returned', now, from);
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
}

/** How a turn was paid, as a stored reply shows it: its source, the credits kept (0 once returned) and the reservation's status. */
export interface TurnPayment {
  readonly source: TurnCharge['source'];
  readonly credits: number;
  readonly status: 'reserved' | 'charged' | 'returned';
}

/** The payments of these turns (a reply's id is its turn's id), by turn id; a turn billing never reserved is absent. */
export async function turnPayments(deps: Pick<Deps, 'db'>, turnIds: readonly string[]): Promise<Map<string, TurnPayment>> {
  const rows = await repo.chargesOf(deps.db, turnIds);
  return new Map(rows.map((c) => [c.turn_id, { source: chargeSource(c.source), credits: c.status === 'returned' ? 0 : c.credits, status: c.status }]));
}

/** Whether a turn's reservation is settled already, live (platform/liveness.ts), or silent. */
export async function reservationState(deps: BillingDeps, turnId: string): Promise<'settled' | 'live' | 'silent'> {
  const row = await repo.findTurnCharge(deps.db, turnId);
  if (row === undefined || row.status !== 'reserved') return 'settled';
  const lastSign = row.alive_at ?? row.created_at;
  return isLive(lastSign.getTime(), deps.clock.now().getTime(), deps.config.streamHeartbeatMs) ? 'live' : 'silent';
}

/**
 * Reserved turns not live for `sweepAfterMs` (RESERVATION_SWEEP_AFTER_MS; their instance crashed or
 * froze): the sweeper's candidates, by the one liveness rule (platform/liveness.ts).
 */
export function silentTurns(deps: BillingDeps, sweepAfterMs: number, batch = 500): Promise<string[]> {
  const since = sweepableSince(deps.clock.now().getTime(), sweepAfterMs);
  return repo.staleReservations(deps.db, since, batch);
}

/** Running turns' heartbeat on their reservations, in one statement (DESIGN §10: the sweeper never takes a live turn). */
export function markTurnsAlive(deps: BillingDeps, turnIds: readonly string[]): Promise<void> {
  return repo.markAlive(deps.db, turnIds, deps.clock.now());
}

/**
 * Settles a turn whose instance is gone, by what it stored: charged when its reply has content (in
 * `store`'s statement, like settle), else returned. Idempotent like settle; false when it was settled already.
 */
export function settleAbandonedTurn(deps: BillingDeps, turnId: string, produced: boolean, closing: ClosingStatement = settledAlone): Promise<boolean> {
  return produced ? chargeTurn(deps, turnId, closing) : returnTurn(deps, turnId);
}
