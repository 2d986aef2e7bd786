import { sql, type Selectable } from 'kysely';
import type { Db, TradeDaysTable, TradesTable, Trx } from '../../db/types.ts';
import type { StoredBook } from './fifo.ts';

export type TradeRow = Omit<Selectable<TradesTable>, 'trading_day' | 'tags'> & { trading_day: string; tags: string[] };

/** The columns of a trade an API object shows (the outcome columns are the journal's own). */
const TRADE_COLUMNS = sql`id, account_id, symbol, side, quantity::text as quantity, price::text as price, fee::text as fee, executed_at,
  trading_day::text as trading_day, external_id, import_key, note, tags, created_at, realized_pnl::text as realized_pnl,
  trip_net::text as trip_net, position_quantity::text as position_quantity, position_cost::text as position_cost, position_opened_at`;

/** Rows per insert or update statement (PostgreSQL takes at most 65,535 parameters in one). */
const BATCH = 1000;

function chunks<T>(items: readonly T[], size = BATCH): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export async function findTrade(db: Db | Trx, accountId: string, id: string): Promise<TradeRow | undefined> {
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where account_id = ${accountId} and id = ${id}`.execute(db);
  return rows[0];
}

/** A list as one parameter (a JSON array): one statement text whatever its length, planned as a join. */
const listParam = (items: readonly string[]) => sql`(select jsonb_array_elements_text(${JSON.stringify(items)}::jsonb))`;

/** Stored trades holding any of these external ids or import keys. */
export async function tradesByKeys(trx: Trx, accountId: string, externalIds: readonly string[], importKeys: readonly string[]): Promise<TradeRow[]> {
  if (externalIds.length === 0 && importKeys.length === 0) return [];
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where account_id = ${accountId}
    and (external_id in ${listParam(externalIds)} or import_key in ${listParam(importKeys)})`.execute(trx);
  return rows;
}

/** A fill as the journal writes it: the trade's fields and its FIFO outcome, all decimals as text. */
export interface TradeInsert {
  readonly id: string;
  readonly symbol: string;
  readonly side: 'buy' | 'sell';
  readonly quantity: string;
  readonly price: string;
  readonly fee: string;
  readonly executedAt: Date;
  readonly tradingDay: string;
  readonly externalId: string | null;
  readonly importKey: string | null;
  readonly note: string | null;
  readonly tags: readonly string[];
  readonly createdAt: Date;
}

export interface OutcomeColumns {
  readonly realized_pnl: string;
  readonly trip_net: string | null;
  readonly position_quantity: string;
  readonly position_cost: string;
  readonly position_opened_at: Date | null;
}

export async function insertTrades(trx: Trx, accountId: string, rows: readonly (TradeInsert & OutcomeColumns)[]): Promise<void> {
  for (const part of chunks(rows)) {
    await trx
      .insertInto('trades')
      .values(
        part.map((r) => ({
          id: r.id,
          account_id: accountId,
          symbol: r.symbol,
          side: r.side,
          quantity: r.quantity,
          price: r.price,
          fee: r.fee,
          executed_at: r.executedAt,
          trading_day: r.tradingDay,
          external_id: r.externalId,
          import_key: r.importKey,
          note: r.note,
          tags: sql`${JSON.stringify(r.tags)}::jsonb`,
          created_at: r.createdAt,
          realized_pnl: r.realized_pnl,
          trip_net: r.trip_net,
          position_quantity: r.position_quantity,
          position_cost: r.position_cost,
          position_opened_at: r.position_opened_at,
        })),
      )
      .execute();
  }
}

/** Rewrites the FIFO outcome of fills whose earlier fills changed. */
export async function updateOutcomes(trx: Trx, rows: readonly (OutcomeColumns & { id: string })[]): Promise<void> {
  for (const part of chunks(rows)) {
    const values = sql.join(
      part.map(
        (r) =>
          sql`(${r.id}::uuid, ${r.realized_pnl}::numeric, ${r.trip_net}::numeric, ${r.position_quantity}::numeric,
            ${r.position_cost}::numeric, ${r.position_opened_at}::timestamptz)`,
      ),
    );
    await sql`update trades set realized_pnl = v.realized, trip_net = v.trip, position_quantity = v.qty, position_cost = v.cost, position_opened_at = v.opened
      from (values ${values}) as v(id, realized, trip, qty, cost, opened) where trades.id = v.id`.execute(trx);
  }
}

export async function deleteTrade(trx: Trx, accountId: string, id: string): Promise<TradeRow | undefined> {
  const { rows } = await sql<TradeRow>`delete from trades where account_id = ${accountId} and id = ${id} returning ${TRADE_COLUMNS}`.execute(trx);
  return rows[0];
}

export async function updateNoteAndTags(
  db: Db,
  accountId: string,
  id: string,
  patch: { note?: string | null; tags?: readonly string[] },
): Promise<TradeRow | undefined> {
  const sets = [
    ...(patch.note !== undefined ? [sql`note = ${patch.note}`] : []),
    ...(patch.tags !== undefined ? [sql`tags = ${JSON.stringify(patch.tags)}::jsonb`] : []),
  ];
  if (sets.length === 0) return findTrade(db, accountId, id);
  const { rows } = await sql<TradeRow>`update trades set ${sql.join(sets)} where account_id = ${accountId} and id = ${id} returning ${TRADE_COLUMNS}`.execute(
    db,
  );
  return rows[0];
}

/** Every fill of one symbol, in the order FIFO applies them. */
export async function symbolFills(trx: Trx, accountId: string, symbol: string): Promise<TradeRow[]> {
  const { rows } =
    await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where account_id = ${accountId} and symbol = ${symbol} order by executed_at, id`.execute(trx);
  return rows;
}

export async function books(trx: Trx, accountId: string, symbols: readonly string[]): Promise<Map<string, StoredBook>> {
  const { rows } = await sql<{ symbol: string; book: StoredBook }>`select symbol, book from trade_books
    where account_id = ${accountId} and symbol in ${listParam(symbols)}`.execute(trx);
  return new Map(rows.map((r) => [r.symbol, r.book]));
}

export async function saveBooks(
  trx: Trx,
  accountId: string,
  saved: readonly { symbol: string; book: StoredBook }[],
  emptied: readonly string[],
): Promise<void> {
  for (const part of chunks(saved)) {
    await trx
      .insertInto('trade_books')
      .values(part.map((b) => ({ account_id: accountId, symbol: b.symbol, book: sql`${JSON.stringify(b.book)}::jsonb` })))
      .onConflict((oc) => oc.columns(['account_id', 'symbol']).doUpdateSet({ book: sql`excluded.book` }))
      .execute();
  }
  if (emptied.length > 0) await sql`delete from trade_books where account_id = ${accountId} and symbol in ${listParam(emptied)}`.execute(trx);
}

/** Recomputes the figures of these trading days from their fills (a day left with none goes). */
export async function recomputeDays(trx: Trx, accountId: string, days: readonly string[]): Promise<void> {
  if (days.length === 0) return;
  const list = sql`(select d::date from jsonb_array_elements_text(${JSON.stringify(days)}::jsonb) as d)`;
  await sql`delete from trade_days where account_id = ${accountId} and trading_day in ${list}`.execute(trx);
  await sql`insert into trade_days (account_id, trading_day, realized_pnl, fees, fills, round_trips, wins, losses, gross_win, gross_loss,
      largest_win, largest_loss, last_executed_at, last_id)
    select account_id, trading_day, sum(realized_pnl), sum(fee), count(*)::int, count(trip_net)::int,
      (count(*) filter (where trip_net > 0))::int, (count(*) filter (where trip_net < 0))::int,
      coalesce(sum(trip_net) filter (where trip_net > 0), 0), coalesce(sum(trip_net) filter (where trip_net < 0), 0),
      max(trip_net) filter (where trip_net > 0), min(trip_net) filter (where trip_net < 0),
      max(executed_at), (array_agg(id order by executed_at desc, id desc))[1]
    from trades where account_id = ${accountId} and trading_day in ${list}
    group by account_id, trading_day`.execute(trx);
}

export interface TradePageQuery {
  readonly from: string | undefined;
  readonly to: string | undefined;
  readonly symbol: string | undefined;
  /** Keyset: the page starts after this (executedAt, id), newest first. */
  readonly before: { executedAt: Date; id: string } | undefined;
  readonly limit: number;
}

export async function listTrades(db: Db, accountId: string, q: TradePageQuery): Promise<TradeRow[]> {
  const where = [
    sql`account_id = ${accountId}`,
    ...(q.from !== undefined ? [sql`trading_day >= ${q.from}::date`] : []),
    ...(q.to !== undefined ? [sql`trading_day <= ${q.to}::date`] : []),
    ...(q.symbol !== undefined ? [sql`symbol = ${q.symbol}`] : []),
    ...(q.before !== undefined ? [sql`(executed_at, id) < (${q.before.executedAt}::timestamptz, ${q.before.id}::uuid)`] : []),
  ];
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where ${sql.join(where, sql` and `)}
    order by executed_at desc, id desc limit ${q.limit}`.execute(db);
  return rows;
}

/** The account's trades oldest first, a page at a time after (executedAt, id). */
export async function tradesAfter(db: Db, accountId: string, after: { executedAt: Date; id: string } | undefined, limit: number): Promise<TradeRow[]> {
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where account_id = ${accountId}
    ${after === undefined ? sql`` : sql`and (executed_at, id) > (${after.executedAt}::timestamptz, ${after.id}::uuid)`}
    order by executed_at, id limit ${limit}`.execute(db);
  return rows;
}

export type DayRow = Omit<Selectable<TradeDaysTable>, 'account_id' | 'last_executed_at' | 'last_id'>;

export async function daysBetween(db: Db, accountId: string, from: string, to: string): Promise<DayRow[]> {
  const { rows } = await sql<DayRow>`select trading_day::text as trading_day, realized_pnl::text as realized_pnl, fees::text as fees, fills,
      round_trips, wins, losses, gross_win::text as gross_win, gross_loss::text as gross_loss, largest_win::text as largest_win,
      largest_loss::text as largest_loss
    from trade_days where account_id = ${accountId} and trading_day between ${from}::date and ${to}::date order by trading_day`.execute(db);
  return rows;
}

/** Realized P&L and fees of every fill of the account. */
export async function allTimeSums(db: Db, accountId: string): Promise<{ realized: string; fees: string }> {
  const { rows } = await sql<{ realized: string; fees: string }>`select coalesce(sum(realized_pnl), 0)::text as realized, coalesce(sum(fees), 0)::text as fees
    from trade_days where account_id = ${accountId}`.execute(db);
  return rows[0] ?? { realized: '0', fees: '0' };
}

export interface PositionRow {
  symbol: string;
  quantity: string;
  cost: string;
  opened_at: Date;
}

/**
 * Each symbol's position after the last fill whose trading day is on or before `to`: the instant of
 * that fill from the days' rollup, then per symbol its last fill up to it (one index probe each).
 */
export async function positionsAt(db: Db, accountId: string, to: string): Promise<PositionRow[]> {
  const { rows } = await sql<PositionRow>`
    with cutoff as (
      select last_executed_at as at, last_id as id from trade_days where account_id = ${accountId} and trading_day <= ${to}::date
      order by last_executed_at desc, last_id desc limit 1
    )
    select b.symbol, p.position_quantity::text as quantity, p.position_cost::text as cost, p.position_opened_at as opened_at
    from cutoff, trade_books b
    cross join lateral (
      select t.position_quantity, t.position_cost, t.position_opened_at from trades t
      where t.account_id = b.account_id and t.symbol = b.symbol and (t.executed_at, t.id) <= (cutoff.at, cutoff.id)
      order by t.executed_at desc, t.id desc limit 1
    ) p
    where b.account_id = ${accountId} and p.position_quantity <> 0`.execute(db);
  return rows;
}
