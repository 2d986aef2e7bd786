import { sql, type RawBuilder, type Selectable } from 'kysely';
import type { Db, LedgerEntriesTable, PurchasesTable, TurnChargesTable, Trx } from '../../db/types.ts';

type LedgerRow = Selectable<LedgerEntriesTable>;
export type TurnChargeRow = Selectable<TurnChargesTable>;
type PurchaseRow = Selectable<PurchasesTable>;
type NewLedgerEntry = Omit<LedgerRow, 'seq'>;

/**
 * Creates the wallet if needed and locks its row for the rest of the transaction. Every money write
 * takes this lock first (then the month's usage, then the turn), so concurrent writers of one user
 * queue here and never deadlock.
 */
export async function lockWallet(trx: Trx, userId: string): Promise<number> {
  const row = await trx
    .insertInto('wallets')
    .values({ user_id: userId, balance: 0 })
    .onConflict((oc) => oc.column('user_id').doUpdateSet({ balance: sql<number>`wallets.balance` }))
    .returning('balance')
    .executeTakeFirstOrThrow();
  return row.balance;
}

/**
 * How a turn is paid, as billing's part of a turn statement yields it: the source (`allowance`,
 * `credits`, `free`) and the credits taken.
 */
export interface ChargeRow {
  readonly source: string;
  readonly credits: number;
}

/** What `reserve_turn` (db/migrations/reserve-turn-v4.ts) is given; `tiers` is the catalogue's tiers as JSON. */
interface TurnReservation {
  readonly turnId: string;
  readonly userId: string;
  /** The id of the `turn:` ledger entry, written only when the turn is paid with credits. */
  readonly ledgerId: string;
  readonly now: Date;
  readonly month: string;
  /**
   * The model's terms: a query of at most one row `(allowance boolean, cost bigint)` — the model's own
   * (`modelTerms`), or a CTE of the caller's statement; no row: nothing is reserved (the part yields none).
   */
  readonly terms: RawBuilder<unknown>;
  readonly images: number;
  readonly tiers: string;
  readonly defaultTier: string;
  /** Another reserved turn of the user with a sign of life since then is live: the turn is refused (the fence). */
  readonly liveSince: Date;
}

/**
 * The reservation as a one-row query `(source, credits)`: reading it decides and reserves the turn
 * (tier, locks, decision, ledger entry, usage and the turn_charges row). A refusal fails the
 * statement that reads it with SQLSTATE `BL402` / `BL429` and the refusal's code as its message, so
 * nothing is written. Read it exactly once (alone, or as a materialised CTE of another statement).
 */
export function reservation(r: TurnReservation): RawBuilder<ChargeRow> {
  return sql<ChargeRow>`
    select r_source as source, r_credits as credits
    from ${r.terms} terms, lateral reserve_turn(${r.turnId}, ${r.userId}, ${r.ledgerId}::uuid, ${r.now}::timestamptz, ${r.month}, terms.allowance,
                      terms.cost, ${r.images}::integer, ${r.tiers}::jsonb, ${r.defaultTier}, ${r.liveSince}::timestamptz)`;
}

/** A model's terms as `reservation` reads them: one row. */
export function modelTerms(allowance: boolean, cost: number): RawBuilder<unknown> {
  return sql`(select ${allowance}::boolean as allowance, ${cost}::bigint as cost)`;
}

/**
 * Appends the entry and moves the cached balance with it, by ledger_append in one statement; false
 * (nothing written) when the reference exists. The caller holds the wallet lock.
 */
export async function appendLedgerEntry(trx: Trx, e: NewLedgerEntry): Promise<boolean> {
  const { rows } = await sql<{ appended: boolean }>`
    select ledger_append(${e.id}::uuid, ${e.user_id}::text, ${e.amount}::bigint, ${e.kind}::text, ${e.reference}::text,
                         ${e.note}::text, ${e.created_at}::timestamptz) as appended`.execute(trx);
  const row = rows[0];
  if (!row) throw new Error('ledger_append returned no row');
  return row.appended;
}

/** Creates the month's usage row if needed and locks it. */
export async function lockUsage(trx: Trx, userId: string, month: string): Promise<{ allowanceTurns: number; images: number }> {
  const row = await trx
    .insertInto('monthly_usage')
    .values({ user_id: userId, month })
    .onConflict((oc) => oc.columns(['user_id', 'month']).doUpdateSet({ images: sql<number>`monthly_usage.images` }))
    .returning(['allowance_turns', 'images'])
    .executeTakeFirstOrThrow();
  return { allowanceTurns: row.allowance_turns, images: row.images };
}

export async function addUsage(trx: Trx, userId: string, month: string, turns: number, images: number): Promise<void> {
  await trx
    .updateTable('monthly_usage')
    .set({ allowance_turns: sql<number>`allowance_turns + ${turns}`, images: sql<number>`images + ${images}` })
    .where('user_id', '=', userId)
    .where('month', '=', month)
    .executeTakeFirstOrThrow();
}

export async function readUsage(db: Db, userId: string, month: string): Promise<{ allowanceTurns: number; images: number }> {
  const row = await db
    .selectFrom('monthly_usage')
    .select(['allowance_turns', 'images'])
    .where('user_id', '=', userId)
    .where('month', '=', month)
    .executeTakeFirst();
  return { allowanceTurns: row?.allowance_turns ?? 0, images: row?.images ?? 0 };
}

export async function readBalance(db: Db | Trx, userId: string): Promise<number> {
  const row = await db.selectFrom('wallets').select('balance').where('user_id', '=', userId).executeTakeFirst();
  return row?.balance ?? 0;
}

/** Sum of the entries whose reference starts with `prefix` (e.g. every refund of one charge). */
export async function sumByReferencePrefix(trx: Trx, userId: string, prefix: string): Promise<number> {
  const row = await trx
    .selectFrom('ledger_entries')
    .select(sql<string | number | null>`sum(amount)`.as('total'))
    .where('user_id', '=', userId)
    .where(sql<boolean>`starts_with(reference, ${prefix})`)
    .executeTakeFirstOrThrow();
  return Number(row.total ?? 0);
}

/** Newest first; `beforeSeq` continues a page. */
export function listLedger(db: Db, userId: string, beforeSeq: number | undefined, limit: number): Promise<LedgerRow[]> {
  let q = db.selectFrom('ledger_entries').selectAll().where('user_id', '=', userId);
  if (beforeSeq !== undefined) q = q.where('seq', '<', beforeSeq);
  return q.orderBy('seq', 'desc').limit(limit).execute();
}

/** How these turns stand with billing: their reservations' source, credits and status. */
export function chargesOf(db: Db, turnIds: readonly string[]): Promise<Pick<TurnChargeRow, 'turn_id' | 'source' | 'credits' | 'status'>[]> {
  if (turnIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('turn_charges').select(['turn_id', 'source', 'credits', 'status']).where('turn_id', 'in', turnIds).execute();
}

export function findTurnCharge(db: Db | Trx, turnId: string): Promise<TurnChargeRow | undefined> {
  return db.selectFrom('turn_charges').selectAll().where('turn_id', '=', turnId).executeTakeFirst();
}

/** Marks a reserved turn charged when read, as a query to embed (TurnBilling.settle); no row when it was not reserved any more. */
export function chargeQuery(turnId: string, now: Date): RawBuilder<ChargeRow> {
  return sql<ChargeRow>`update turn_charges set status = 'charged', settled_at = ${now}
    where turn_id = ${turnId} and status = 'reserved' returning credits, source`;
}

/** The settlement part of a turn that produced nothing: it writes nothing (the return follows on its own). */
export function noSettlement(): RawBuilder<ChargeRow> {
  return sql<ChargeRow>`select 0::bigint as credits, ''::text as source where false`;
}

/** Moves a turn from `from` (reserved, or charged for a refund) to `status`; undefined when it was not in `from` any more. */
export function finishTurnCharge(
  db: Db | Trx,
  turnId: string,
  status: 'charged' | 'returned',
  now: Date,
  from: 'reserved' | 'charged' = 'reserved',
): Promise<TurnChargeRow | undefined> {
  return db
    .updateTable('turn_charges')
    .set({ status, settled_at: now })
    .where('turn_id', '=', turnId)
    .where('status', '=', from)
    .returningAll()
    .executeTakeFirst();
}

/** Reserved turns with no sign of life since `before` (their last heartbeat, else their reservation). */
export async function staleReservations(db: Db, before: Date, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('turn_charges')
    .select('turn_id')
    .where('status', '=', 'reserved')
    .where((eb) => eb.fn.coalesce('alive_at', 'created_at'), '<', before)
    .orderBy('created_at')
    .limit(limit)
    .execute();
  return rows.map((r) => r.turn_id);
}

/** A running turn's sign of life (its heartbeat); nothing once it is settled. */
export async function markAlive(db: Db, turnIds: readonly string[], now: Date): Promise<void> {
  if (turnIds.length === 0) return;
  await db.updateTable('turn_charges').set({ alive_at: now }).where('turn_id', 'in', turnIds).where('status', '=', 'reserved').execute();
}

export async function insertPurchase(db: Db, row: PurchaseRow): Promise<void> {
  await db.insertInto('purchases').values(row).execute();
}

export function findPurchaseBySession(db: Db | Trx, sessionId: string): Promise<PurchaseRow | undefined> {
  return db.selectFrom('purchases').selectAll().where('session_id', '=', sessionId).executeTakeFirst();
}

/** The purchases of these checkout sessions. */
export function purchasesOfSessions(db: Db, sessionIds: readonly string[]): Promise<Pick<PurchaseRow, 'session_id' | 'pack_id' | 'amount' | 'currency'>[]> {
  if (sessionIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('purchases').select(['session_id', 'pack_id', 'amount', 'currency']).where('session_id', 'in', sessionIds).execute();
}

/** The user's own purchase of a checkout session; another user's is not found. */
export function findOwnPurchase(db: Db, userId: string, sessionId: string): Promise<PurchaseRow | undefined> {
  return db.selectFrom('purchases').selectAll().where('session_id', '=', sessionId).where('user_id', '=', userId).executeTakeFirst();
}

export function findPurchaseById(db: Db | Trx, id: string): Promise<PurchaseRow | undefined> {
  return db.selectFrom('purchases').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findPurchaseByPaymentIntent(db: Db | Trx, paymentIntent: string): Promise<PurchaseRow | undefined> {
  return db.selectFrom('purchases').selectAll().where('payment_intent', '=', paymentIntent).executeTakeFirst();
}

export async function markPurchasePaid(trx: Trx, sessionId: string, paymentIntent: string | null, now: Date): Promise<void> {
  await trx
    .updateTable('purchases')
    .set((eb) => ({ status: 'paid', paid_at: now, payment_intent: eb.fn.coalesce('payment_intent', sql<string | null>`${paymentIntent}`) }))
    .where('session_id', '=', sessionId)
    // A credit is what happened, even after an expired or failed event arrived first.
    .where('status', '!=', 'paid')
    .execute();
}

/** Closes a pending purchase the processor closed unpaid; true when this call changed it. */
export async function markPurchaseClosed(db: Db, sessionId: string, status: 'expired' | 'failed'): Promise<boolean> {
  const result = await db.updateTable('purchases').set({ status }).where('session_id', '=', sessionId).where('status', '=', 'pending').executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
