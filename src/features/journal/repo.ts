import { sql, type Selectable } from 'kysely';
import type { Db, TradeDaysTable, TradesTable, Trx } from '../../db/types.ts';
import { ANALYZE_RULE } from '../../db/embedded-statistics.ts';
import type { StoredBook } from './fifo.ts';

export type TradeRow = Omit<Selectable<TradesTable>, 'trading_day' | 'tags'> & { trading_day: string; tags: string[] };

/** The columns of a trade an API object shows (the outcome columns are the journal's own). */
const TRADE_COLUMNS = sql`id, account_id, symbol, side, quantity::text as quantity, price::text as price, fee::text as fee, executed_at,
  trading_day::text as trading_day, external_id, import_key, note, tags, created_at, realized_pnl::text as realized_pnl,
  trip_net::text as trip_net, position_quantity::text as position_quantity, position_cost::text as position_cost, position_opened_at,
  asset_class, multiplier::text as multiplier, stop_price::text as stop_price`;

/** Rows per insert or update statement (PostgreSQL takes at most 65,535 parameters in one). */
const BATCH = 1000;
/** Rows per statement where the rows travel as one JSON parameter. */
const JSON_BATCH = 10_000;

function chunks<T>(items: readonly T[], size = BATCH): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

async function findTrade(db: Db | Trx, accountId: string, id: string): Promise<TradeRow | undefined> {
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where account_id = ${accountId} and id = ${id}`.execute(db);
  return rows[0];
}

/** A list as one parameter (a JSON array): one statement text whatever its length, planned as a join. */
const listParam = (items: readonly string[]) => sql`(select jsonb_array_elements_text(${JSON.stringify(items)}::jsonb))`;

/**
 * After a write that added more fills than autovacuum's rule allows for (50 + 10 % of the stored fills), the
 * journal's tables are analyzed in the writer's own transaction (ANALYZE counts that transaction's rows), so
 * its commit publishes the statistics with the rows. Otherwise the planner goes on planning with statistics
 * from before the write (autovacuum looks once a minute; the embedded store has none), which hold none of a
 * new account's fills: it estimates the account at one row and joins a 50,000-row import's external ids by
 * nested loop — over 30 s of the database's CPU where a hash join takes 0.15 s (the import then fails
 * with the statement timeout). Answers whether it analyzed.
 */
export async function analyzeAfterGrowth(trx: Trx, added: number): Promise<boolean> {
  if (added <= ANALYZE_RULE.baseRows) return false;
  const { rows } = await sql<{ tuples: number }>`select greatest(reltuples, 0)::float8 as tuples from pg_class where oid = 'trades'::regclass`.execute(trx);
  if (added <= ANALYZE_RULE.baseRows + ANALYZE_RULE.share * (rows[0]?.tuples ?? 0)) return false;
  await sql`analyze trades, trade_round_trips, trade_trip_groups, trade_days, trade_books`.execute(trx);
  return true;
}

/** Stored trades holding any of these external ids. */
export async function tradesByExternalIds(trx: Trx, accountId: string, externalIds: readonly string[]): Promise<TradeRow[]> {
  if (externalIds.length === 0) return [];
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades where account_id = ${accountId}
    and external_id in ${listParam(externalIds)}`.execute(trx);
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
  readonly assetClass: string;
  readonly multiplier: string;
  readonly stopPrice: string | null;
}

export interface OutcomeColumns {
  readonly realized_pnl: string;
  readonly trip_net: string | null;
  readonly position_quantity: string;
  readonly position_cost: string;
  readonly position_opened_at: Date | null;
}

/** An instant as epoch milliseconds in a JSON tuple, and back in SQL (exact: `to_timestamp` rounds to the microsecond). */
const epochMs = (d: Date | null): number | null => (d === null ? null : d.getTime());
const instantAt = (e: ReturnType<typeof sql>) => sql`to_timestamp((${e})::bigint / 1000.0)`;

/**
 * Inserts the rows as one JSON parameter a batch, each row a tuple (an array, instants as epoch
 * milliseconds): a statement of 1,000 rows of 22 bound values cost more to build, bind and (on the
 * embedded store) parse than the rows cost to insert, and objects of named fields twice what tuples
 * cost to write out and read back.
 */
export async function insertTrades(trx: Trx, accountId: string, rows: readonly (TradeInsert & OutcomeColumns)[]): Promise<void> {
  for (const part of chunks(rows, JSON_BATCH)) {
    const json = JSON.stringify(
      part.map((r) => [
        r.id,
        r.symbol,
        r.side,
        r.quantity,
        r.price,
        r.fee,
        r.executedAt.getTime(),
        r.tradingDay,
        r.externalId,
        r.importKey,
        r.note,
        r.tags,
        r.createdAt.getTime(),
        r.realized_pnl,
        r.trip_net,
        r.position_quantity,
        r.position_cost,
        epochMs(r.position_opened_at),
        r.assetClass,
        r.multiplier,
        r.stopPrice,
      ]),
    );
    await sql`insert into trades (id, account_id, symbol, side, quantity, price, fee, executed_at, trading_day, external_id, import_key, note, tags,
        created_at, realized_pnl, trip_net, position_quantity, position_cost, position_opened_at, asset_class, multiplier, stop_price)
      select (x->>0)::uuid, ${accountId}::uuid, x->>1, x->>2, (x->>3)::numeric, (x->>4)::numeric, (x->>5)::numeric, ${instantAt(sql`x->>6`)},
        (x->>7)::date, x->>8, x->>9, x->>10, x->11, ${instantAt(sql`x->>12`)}, (x->>13)::numeric, (x->>14)::numeric, (x->>15)::numeric,
        (x->>16)::numeric, ${instantAt(sql`x->>17`)}, x->>18, (x->>19)::numeric, (x->>20)::numeric
      from jsonb_array_elements(${json}::jsonb) as x`.execute(trx);
  }
}

/** Rewrites the FIFO outcome of fills whose earlier fills changed (the rows as one JSON parameter of tuples: fewer, cheaper binds). */
export async function updateOutcomes(trx: Trx, rows: readonly (OutcomeColumns & { id: string })[]): Promise<void> {
  for (const part of chunks(rows, JSON_BATCH)) {
    const json = JSON.stringify(part.map((r) => [r.id, r.realized_pnl, r.trip_net, r.position_quantity, r.position_cost, epochMs(r.position_opened_at)]));
    await sql`update trades set realized_pnl = v.realized_pnl, trip_net = v.trip_net, position_quantity = v.position_quantity,
        position_cost = v.position_cost, position_opened_at = v.position_opened_at
      from (select (x->>0)::uuid as id, (x->>1)::numeric as realized_pnl, (x->>2)::numeric as trip_net, (x->>3)::numeric as position_quantity,
          (x->>4)::numeric as position_cost, ${instantAt(sql`x->>5`)} as position_opened_at
        from jsonb_array_elements(${json}::jsonb) as x) v
      where trades.id = v.id`.execute(trx);
  }
}

export async function deleteTrade(trx: Trx, accountId: string, id: string): Promise<TradeRow | undefined> {
  const { rows } = await sql<TradeRow>`delete from trades where account_id = ${accountId} and id = ${id} returning ${TRADE_COLUMNS}`.execute(trx);
  return rows[0];
}

export async function updateNoteAndTags(
  db: Db | Trx,
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

/** What a replay reads of a stored fill: the fill and the outcome stored on it. */
export type ReplayRow = Pick<
  TradeRow,
  | 'id'
  | 'executed_at'
  | 'trading_day'
  | 'side'
  | 'quantity'
  | 'price'
  | 'fee'
  | 'multiplier'
  | 'stop_price'
  | 'asset_class'
  | 'tags'
  | 'realized_pnl'
  | 'trip_net'
  | 'position_quantity'
  | 'position_cost'
  | 'position_opened_at'
>;

type ReplayTuple = [
  string,
  string,
  string,
  'buy' | 'sell',
  string,
  string,
  string,
  string,
  string | null,
  string,
  string[],
  string,
  string | null,
  string,
  string,
  string | null,
];

/**
 * Every fill of one symbol, in the order FIFO applies them, read as one JSON document: a replay reads
 * up to every fill of an account, and on the embedded store one value of 100,000 tuples parses four
 * times faster than 100,000 rows. Instants travel as epoch milliseconds (the service keeps them so).
 */
export async function symbolFills(trx: Trx, accountId: string, symbol: string): Promise<ReplayRow[]> {
  const { rows } = await sql<{ fills: string }>`select coalesce(json_agg(json_build_array(id, (extract(epoch from executed_at) * 1000)::bigint::text,
      trading_day::text, side, quantity::text, price::text, fee::text, multiplier::text, stop_price::text, asset_class, tags, realized_pnl::text,
      trip_net::text, position_quantity::text, position_cost::text, (extract(epoch from position_opened_at) * 1000)::bigint::text)
      order by executed_at, id)::text, '[]') as fills
    from trades where account_id = ${accountId} and symbol = ${symbol}`.execute(trx);
  return (JSON.parse(rows[0]?.fills ?? '[]') as ReplayTuple[]).map((f) => ({
    id: f[0],
    executed_at: new Date(Number(f[1])),
    trading_day: f[2],
    side: f[3],
    quantity: f[4],
    price: f[5],
    fee: f[6],
    multiplier: f[7],
    stop_price: f[8],
    asset_class: f[9],
    tags: f[10],
    realized_pnl: f[11],
    trip_net: f[12],
    position_quantity: f[13],
    position_cost: f[14],
    position_opened_at: f[15] === null ? null : new Date(Number(f[15])),
  }));
}

export async function books(trx: Trx, accountId: string, symbols: readonly string[]): Promise<Map<string, { book: StoredBook; version: number }>> {
  const { rows } = await sql<{ symbol: string; book: StoredBook; version: number }>`select symbol, book, version from trade_books
    where account_id = ${accountId} and symbol in ${listParam(symbols)}`.execute(trx);
  return new Map(rows.map((r) => [r.symbol, { book: r.book, version: r.version }]));
}

export async function saveBooks(
  trx: Trx,
  accountId: string,
  saved: readonly { symbol: string; book: StoredBook }[],
  emptied: readonly string[],
  version: number,
): Promise<void> {
  for (const part of chunks(saved)) {
    await trx
      .insertInto('trade_books')
      .values(part.map((b) => ({ account_id: accountId, symbol: b.symbol, book: sql`${JSON.stringify(b.book)}::jsonb`, version })))
      .onConflict((oc) => oc.columns(['account_id', 'symbol']).doUpdateSet({ book: sql`excluded.book`, version: sql`excluded.version` }))
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

/** A Trade's columns as one JSON tuple (instants as epoch milliseconds), and nothing the journal keeps beside them. */
const LISTED_TUPLE = sql`json_build_array(id, account_id, symbol, side, quantity::text, price::text, fee::text,
  (extract(epoch from executed_at) * 1000)::bigint::text, trading_day::text, external_id, note, tags,
  (extract(epoch from created_at) * 1000)::bigint::text, asset_class, multiplier::text, stop_price::text)`;

type ListedTuple = [
  string,
  string,
  string,
  'buy' | 'sell',
  string,
  string,
  string,
  string,
  string,
  string | null,
  string | null,
  string[],
  string,
  string,
  string,
  string | null,
];

export type ListedTradeRow = Omit<TradeRow, 'import_key' | 'realized_pnl' | 'trip_net' | 'position_quantity' | 'position_cost' | 'position_opened_at'>;

export async function listTrades(db: Db, accountId: string, q: TradePageQuery): Promise<ListedTradeRow[]> {
  return tradePage(db, accountId, q, 'newest', q.before, q.limit);
}

/** The account's trades oldest first (within the export's filters), a page at a time after (executedAt, id). */
export async function tradesAfter(
  db: Db,
  accountId: string,
  after: { executedAt: Date; id: string } | undefined,
  limit: number,
  filter: { from?: string | undefined; to?: string | undefined; symbol?: string | undefined } = {},
): Promise<ListedTradeRow[]> {
  return tradePage(db, accountId, filter, 'oldest', after, limit);
}

const DAY_MS = 86_400_000;

const dayStart = (day: string): number => Date.parse(`${day}T00:00:00Z`);

/**
 * A range of trading days over rows that also carry the instant the day was taken from (a fill's
 * executedAt, a round trip's closedAt). A trading day is the date of its instant in the zone then in
 * force, and every offset is under a day, so the rows lie within a day of their dates in UTC: the
 * instants bound the scan of an (account, instant, id) index to the days asked for. The day itself
 * needs checking only in the day at each end: a row a whole day past the start's midnight (UTC) is on
 * or after the first day, one before the end's midnight on or before the last. Said so, the check
 * looks to the planner as what it is, true of nearly every row the instants let through; compared
 * outright, the day and the instant ranges look independent, the rows they keep a fraction of the
 * true count, and a plan that reads the whole range unordered and sorts it for every page looks
 * cheaper than reading the index in order up to the page's end (a quarter of 12,000 fills: 20–40 ms a
 * page against under 1 ms).
 */
function dayRange(day: ReturnType<typeof sql>, at: ReturnType<typeof sql>, from: string | undefined, to: string | undefined) {
  return [
    ...(from === undefined
      ? []
      : [
          sql`${at} >= ${new Date(dayStart(from) - DAY_MS)}::timestamptz`,
          sql`(${day} >= ${from}::date or ${at} >= ${new Date(dayStart(from) + DAY_MS)}::timestamptz)`,
        ]),
    ...(to === undefined
      ? []
      : [sql`${at} < ${new Date(dayStart(to) + 2 * DAY_MS)}::timestamptz`, sql`(${day} <= ${to}::date or ${at} < ${new Date(dayStart(to))}::timestamptz)`]),
  ];
}

/**
 * A page of trades in (executedAt, id) order past a keyset position, read as one JSON document: on the
 * embedded store the rows of a result are parsed field by field in JavaScript, which cost a page of
 * 200 more than finding them. A range of days is read as a range of the index (`dayRange`).
 */
async function tradePage(
  db: Db,
  accountId: string,
  filter: { from?: string | undefined; to?: string | undefined; symbol?: string | undefined },
  order: 'newest' | 'oldest',
  past: { executedAt: Date; id: string } | undefined,
  limit: number,
): Promise<ListedTradeRow[]> {
  const where = [
    sql`account_id = ${accountId}`,
    ...dayRange(sql`trading_day`, sql`executed_at`, filter.from, filter.to),
    ...(filter.symbol !== undefined ? [sql`symbol = ${filter.symbol}`] : []),
    ...(past === undefined
      ? []
      : order === 'newest'
        ? [sql`(executed_at, id) < (${past.executedAt}::timestamptz, ${past.id}::uuid)`]
        : [sql`(executed_at, id) > (${past.executedAt}::timestamptz, ${past.id}::uuid)`]),
  ];
  const by = order === 'newest' ? sql`executed_at desc, id desc` : sql`executed_at, id`;
  const { rows } = await sql<{ page: string }>`select coalesce(json_agg(${LISTED_TUPLE} order by ${by})::text, '[]') as page
    from (select * from trades where ${sql.join(where, sql` and `)} order by ${by} limit ${limit}) t`.execute(db);
  return (JSON.parse(rows[0]?.page ?? '[]') as ListedTuple[]).map((t) => ({
    id: t[0],
    account_id: t[1],
    symbol: t[2],
    side: t[3],
    quantity: t[4],
    price: t[5],
    fee: t[6],
    executed_at: new Date(Number(t[7])),
    trading_day: t[8],
    external_id: t[9],
    note: t[10],
    tags: t[11],
    created_at: new Date(Number(t[12])),
    asset_class: t[13],
    multiplier: t[14],
    stop_price: t[15],
  }));
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

/** A closed round trip as stored (DESIGN §17; journal/round-trips.ts writes and reads it). */
export interface RoundTripRow {
  readonly id: string;
  readonly symbol: string;
  readonly side: 'long' | 'short';
  readonly asset_class: string;
  readonly multiplier: string;
  readonly opened_at: Date;
  readonly closed_at: Date;
  readonly opening_day: string;
  readonly trading_day: string;
  readonly open_hour: number;
  readonly hold_seconds: string;
  readonly max_quantity: string;
  readonly entry_average: string;
  readonly exit_average: string;
  readonly realized_pnl: string;
  readonly fees: string;
  readonly net_pnl: string;
  readonly initial_risk: string | null;
  readonly r_multiple: string | null;
  readonly fills: number;
  readonly tags: string[];
}

/** Inserts round trips as one JSON parameter of tuples a batch (as insertTrades does). */
export async function insertRoundTrips(trx: Trx, accountId: string, rows: readonly RoundTripRow[]): Promise<void> {
  for (const part of chunks(rows, JSON_BATCH)) {
    const json = JSON.stringify(
      part.map((r) => [
        r.id,
        r.symbol,
        r.side,
        r.asset_class,
        r.multiplier,
        r.opened_at.getTime(),
        r.closed_at.getTime(),
        r.opening_day,
        r.trading_day,
        r.open_hour,
        r.hold_seconds,
        r.max_quantity,
        r.entry_average,
        r.exit_average,
        r.realized_pnl,
        r.fees,
        r.net_pnl,
        r.initial_risk,
        r.r_multiple,
        r.fills,
        r.tags,
      ]),
    );
    await sql`insert into trade_round_trips (id, account_id, symbol, side, asset_class, multiplier, opened_at, closed_at, opening_day, trading_day,
        open_hour, hold_seconds, max_quantity, entry_average, exit_average, realized_pnl, fees, net_pnl, initial_risk, r_multiple, fills, tags)
      select (x->>0)::uuid, ${accountId}::uuid, x->>1, x->>2, x->>3, (x->>4)::numeric, ${instantAt(sql`x->>5`)}, ${instantAt(sql`x->>6`)},
        (x->>7)::date, (x->>8)::date, (x->>9)::smallint, (x->>10)::bigint, (x->>11)::numeric, (x->>12)::numeric, (x->>13)::numeric,
        (x->>14)::numeric, (x->>15)::numeric, (x->>16)::numeric, (x->>17)::numeric, (x->>18)::numeric, (x->>19)::int, x->20
      from jsonb_array_elements(${json}::jsonb) as x`.execute(trx);
  }
}

/** A replayed symbol's round trips are written anew: deletes them, giving the trading days they were on. */
export async function deleteRoundTrips(trx: Trx, accountId: string, symbols: readonly string[]): Promise<string[]> {
  if (symbols.length === 0) return [];
  const { rows } = await sql<{ day: string }>`with gone as (
      delete from trade_round_trips where account_id = ${accountId} and symbol in ${listParam(symbols)} returning trading_day
    )
    select distinct trading_day::text as day from gone`.execute(trx);
  return rows.map((r) => r.day);
}

/** The report's groupings and the what-if exclusions, as SQL over one round trip `rt` (DESIGN §17). */
export type TripDimension = 'symbol' | 'tag' | 'side' | 'weekday' | 'hour' | 'holdTime';

const HOLD_BUCKET = sql`case when rt.hold_seconds < 60 then '<1m' when rt.hold_seconds < 300 then '1m-5m'
  when rt.hold_seconds < 1800 then '5m-30m' when rt.hold_seconds < 7200 then '30m-2h' when rt.hold_seconds < 86400 then '2h-1d'
  when rt.hold_seconds < 604800 then '1d-1w' else '>=1w' end`;

function dimension(by: TripDimension) {
  switch (by) {
    case 'symbol':
      return sql`rt.symbol`;
    case 'tag':
      return sql`tg.tag`;
    case 'side':
      return sql`rt.side`;
    case 'weekday':
      return sql`to_char(rt.opening_day, 'dy')`;
    case 'hour':
      return sql`lpad(rt.open_hour::text, 2, '0')`;
    case 'holdTime':
      return HOLD_BUCKET;
  }
}

export interface TripExclusion {
  readonly by: TripDimension;
  readonly value: string;
}

function excluded(e: TripExclusion) {
  if (e.by === 'tag') return sql`rt.tags @> ${JSON.stringify([e.value])}::jsonb`;
  return sql`${dimension(e.by)} = ${e.value}`;
}

export interface TripFilter {
  readonly from: string | undefined;
  readonly to: string | undefined;
  readonly symbol?: string | undefined;
  readonly tag?: string | undefined;
  readonly side?: 'long' | 'short' | undefined;
  readonly exclude?: readonly TripExclusion[] | undefined;
}

function tripWhere(accountId: string, f: TripFilter) {
  const exclusions = f.exclude ?? [];
  return [
    sql`rt.account_id = ${accountId}`,
    ...(f.from !== undefined ? [sql`rt.trading_day >= ${f.from}::date`] : []),
    ...(f.to !== undefined ? [sql`rt.trading_day <= ${f.to}::date`] : []),
    ...(f.symbol !== undefined ? [sql`rt.symbol = ${f.symbol}`] : []),
    ...(f.tag !== undefined ? [sql`rt.tags @> ${JSON.stringify([f.tag])}::jsonb`] : []),
    ...(f.side !== undefined ? [sql`rt.side = ${f.side}`] : []),
    ...(exclusions.length > 0 ? [sql`not (${sql.join(exclusions.map(excluded), sql` or `)})`] : []),
  ];
}

/** A round trip's columns as one JSON tuple (numerics as text, instants as epoch milliseconds). */
const ROUND_TRIP_TUPLE = sql`json_build_array(rt.id, rt.symbol, rt.side, rt.asset_class, rt.multiplier::text,
  (extract(epoch from rt.opened_at) * 1000)::bigint::text, (extract(epoch from rt.closed_at) * 1000)::bigint::text, rt.opening_day::text,
  rt.trading_day::text, rt.open_hour, rt.hold_seconds::text, rt.max_quantity::text, rt.entry_average::text, rt.exit_average::text,
  rt.realized_pnl::text, rt.fees::text, rt.net_pnl::text, rt.initial_risk::text, rt.r_multiple::text, rt.fills, rt.tags)`;

type RoundTripTuple = [
  string,
  string,
  'long' | 'short',
  string,
  string,
  string,
  string,
  string,
  string,
  number,
  string,
  string,
  string,
  string,
  string,
  string,
  string,
  string | null,
  string | null,
  number,
  string[],
];

/**
 * A page of round trips, newest close first; keyset on (closedAt, id). Read as one JSON document, as a
 * trades page is: on the embedded store parsing 200 rows of 21 fields cost ten times finding them. A
 * round trip's day is its closing fill's trading day, taken at `closed_at`, so a day range bounds the
 * scan of (account, closedAt, id) as a trades page's does (`dayRange`).
 */
export async function listRoundTrips(
  db: Db,
  accountId: string,
  f: TripFilter & { before: { closedAt: Date; id: string } | undefined; limit: number },
): Promise<RoundTripRow[]> {
  const where = [
    ...tripWhere(accountId, { ...f, from: undefined, to: undefined }),
    ...dayRange(sql`rt.trading_day`, sql`rt.closed_at`, f.from, f.to),
    ...(f.before !== undefined ? [sql`(rt.closed_at, rt.id) < (${f.before.closedAt}::timestamptz, ${f.before.id}::uuid)`] : []),
  ];
  const { rows } = await sql<{ page: string }>`select coalesce(json_agg(${ROUND_TRIP_TUPLE} order by rt.closed_at desc, rt.id desc)::text, '[]') as page
    from (select * from trade_round_trips rt where ${sql.join(where, sql` and `)} order by rt.closed_at desc, rt.id desc limit ${f.limit}) rt`.execute(db);
  return (JSON.parse(rows[0]?.page ?? '[]') as RoundTripTuple[]).map((t) => ({
    id: t[0],
    symbol: t[1],
    side: t[2],
    asset_class: t[3],
    multiplier: t[4],
    opened_at: new Date(Number(t[5])),
    closed_at: new Date(Number(t[6])),
    opening_day: t[7],
    trading_day: t[8],
    open_hour: t[9],
    hold_seconds: t[10],
    max_quantity: t[11],
    entry_average: t[12],
    exit_average: t[13],
    realized_pnl: t[14],
    fees: t[15],
    net_pnl: t[16],
    initial_risk: t[17],
    r_multiple: t[18],
    fills: t[19],
    tags: t[20],
  }));
}

/** One group's round trips summed (exact numerics as text), with the max drawdown of its daily net. */
export interface TripTotalsRow {
  readonly key: string | null;
  readonly trips: number;
  readonly fills: number;
  readonly realized: string;
  readonly fees: string;
  readonly wins: number;
  readonly losses: number;
  readonly gross_win: string;
  readonly gross_loss: string;
  readonly largest_win: string | null;
  readonly largest_loss: string | null;
  readonly r_sum: string;
  readonly r_count: number;
  readonly risk_net: string;
  readonly risk_sum: string;
  readonly max_drawdown: string;
}

/**
 * Where a report or what-if can read the group rows (trade_trip_groups) instead of every round trip:
 * a grouping kept (`GROUPED`), no filter by symbol, tag or side, and exclusions, if any, all of one
 * kept grouping other than tag (a round trip is in one group of it, so the groups left are exactly the
 * round trips left) and the grouping reported, if one is. Anything else sums the round trips.
 */
function groupRows(f: TripFilter, by: TripDimension | null): { dimension: string; excluded: string[] } | undefined {
  if (f.symbol !== undefined || f.tag !== undefined || f.side !== undefined) return undefined;
  const exclusions = f.exclude ?? [];
  const first = exclusions[0];
  if (first === undefined) return by === null || isGrouped(by) ? { dimension: by ?? 'all', excluded: [] } : undefined;
  if (first.by === 'tag' || !isGrouped(first.by) || exclusions.some((e) => e.by !== first.by) || (by !== null && by !== first.by)) return undefined;
  return { dimension: first.by, excluded: exclusions.map((e) => e.value) };
}

/** The day sums of a range per group: from the group rows where `groupRows` allows, else from the round trips. */
function daySums(accountId: string, f: TripFilter, by: TripDimension | null) {
  const rows = groupRows(f, by);
  if (rows === undefined) {
    const key = by === null ? sql`null::text` : dimension(by);
    const tags = by === 'tag' ? sql`left join lateral jsonb_array_elements_text(rt.tags) as tg(tag) on true` : sql``;
    return sql`select ${key} as key, rt.trading_day, count(*) as trips, sum(rt.fills) as fills, sum(rt.realized_pnl) as realized, sum(rt.fees) as fees,
        count(*) filter (where rt.net_pnl > 0) as wins, count(*) filter (where rt.net_pnl < 0) as losses,
        sum(rt.net_pnl) filter (where rt.net_pnl > 0) as gross_win, sum(rt.net_pnl) filter (where rt.net_pnl < 0) as gross_loss,
        max(rt.net_pnl) filter (where rt.net_pnl > 0) as largest_win, min(rt.net_pnl) filter (where rt.net_pnl < 0) as largest_loss,
        sum(rt.r_multiple) as r_sum, count(rt.r_multiple) as r_count,
        sum(rt.net_pnl) filter (where rt.initial_risk is not null) as risk_net, sum(rt.initial_risk) as risk_sum, sum(rt.net_pnl) as net
      from trade_round_trips rt ${tags} where ${sql.join(tripWhere(accountId, f), sql` and `)}
      group by 1, 2`;
  }
  const key = by === null ? sql`null::text` : by === 'tag' ? sql`nullif(g.key, '')` : sql`g.key`;
  return sql`select ${key} as key, g.trading_day, sum(g.trips) as trips, sum(g.fills) as fills, sum(g.realized) as realized, sum(g.fees) as fees,
      sum(g.wins) as wins, sum(g.losses) as losses, sum(g.gross_win) as gross_win, sum(g.gross_loss) as gross_loss,
      max(g.largest_win) as largest_win, min(g.largest_loss) as largest_loss, sum(g.r_sum) as r_sum, sum(g.r_count) as r_count,
      sum(g.risk_net) as risk_net, sum(g.risk_sum) as risk_sum, sum(g.net) as net
    from trade_trip_groups g
    where g.account_id = ${accountId} and g.dimension = ${rows.dimension}
      ${f.from !== undefined ? sql`and g.trading_day >= ${f.from}::date` : sql``} ${f.to !== undefined ? sql`and g.trading_day <= ${f.to}::date` : sql``}
      ${rows.excluded.length > 0 ? sql`and g.key not in ${listParam(rows.excluded)}` : sql``}
    group by 1, 2`;
}

/**
 * The round trips of a range summed per group (or as one group), each with the largest fall of its
 * cumulative daily net P&L from 0 at the range's start: one row a group, so what leaves the database
 * is a few rows whatever the number of trips (on the embedded store, reading rows out costs more than
 * summing them).
 */
export async function tripTotals(db: Db, accountId: string, f: TripFilter, by: TripDimension | null): Promise<TripTotalsRow[]> {
  // Summed per group and closing day first, then per group over its days, where the running net and
  // its running peak give the drawdown.
  const { rows } = await sql<TripTotalsRow>`
    with days as (${daySums(accountId, f, by)}),
    running as (select *, sum(net) over (partition by key order by trading_day) as cumulative from days),
    peaked as (select *, greatest(max(cumulative) over (partition by key order by trading_day), 0) as peak from running)
    select key, sum(trips)::int as trips, sum(fills)::int as fills, sum(realized)::text as realized, sum(fees)::text as fees,
      sum(wins)::int as wins, sum(losses)::int as losses, coalesce(sum(gross_win), 0)::text as gross_win, coalesce(sum(gross_loss), 0)::text as gross_loss,
      max(largest_win)::text as largest_win, min(largest_loss)::text as largest_loss, coalesce(sum(r_sum), 0)::text as r_sum, sum(r_count)::int as r_count,
      coalesce(sum(risk_net), 0)::text as risk_net, coalesce(sum(risk_sum), 0)::text as risk_sum, max(peak - cumulative)::text as max_drawdown
    from peaked group by key`.execute(db);
  return rows;
}

/** The round trips of a range per closing day (the what-if journal's days), oldest first. */
export interface TripDayRow {
  readonly trading_day: string;
  readonly trips: number;
  readonly fills: number;
  readonly realized: string;
  readonly fees: string;
  readonly wins: number;
  readonly losses: number;
}

export async function tripDays(db: Db, accountId: string, f: TripFilter): Promise<TripDayRow[]> {
  const { rows } = await sql<TripDayRow>`select d.trading_day::text as trading_day, d.trips::int as trips, d.fills::int as fills,
      d.realized::text as realized, d.fees::text as fees, d.wins::int as wins, d.losses::int as losses
    from (${daySums(accountId, f, null)}) d order by d.trading_day`.execute(db);
  return rows;
}

/**
 * The groupings kept as group rows besides `all`: those with a few groups a day. A symbol's or an
 * hour's groups are nearly as many as the round trips in an active account, so a report by those
 * sums the round trips themselves.
 */
const GROUPED = ['side', 'weekday', 'holdTime', 'tag'] as const satisfies readonly TripDimension[];
const isGrouped = (by: TripDimension): boolean => (GROUPED as readonly TripDimension[]).includes(by);

/**
 * Rewrites the group rows (trade_trip_groups) of these trading days from their round trips: run after
 * a write changed round trips on them, in its transaction. One pass for the groupings of one value a
 * round trip, one for its tags ('' for none).
 */
export async function recomputeTripGroups(trx: Trx, accountId: string, days: readonly string[]): Promise<void> {
  if (days.length === 0) return;
  const inDays = (day: ReturnType<typeof sql>) => sql`${day} in (select value::date from jsonb_array_elements_text(${JSON.stringify(days)}::jsonb))`;
  await sql`delete from trade_trip_groups where account_id = ${accountId} and ${inDays(sql`trading_day`)}`.execute(trx);
  const sums = sql`count(*), sum(rt.fills), sum(rt.realized_pnl), sum(rt.fees), sum(rt.net_pnl),
    count(*) filter (where rt.net_pnl > 0), count(*) filter (where rt.net_pnl < 0),
    coalesce(sum(rt.net_pnl) filter (where rt.net_pnl > 0), 0), coalesce(sum(rt.net_pnl) filter (where rt.net_pnl < 0), 0),
    max(rt.net_pnl) filter (where rt.net_pnl > 0), min(rt.net_pnl) filter (where rt.net_pnl < 0),
    coalesce(sum(rt.r_multiple), 0), count(rt.r_multiple),
    coalesce(sum(rt.net_pnl) filter (where rt.initial_risk is not null), 0), coalesce(sum(rt.initial_risk), 0)`;
  const mine = sql`rt.account_id = ${accountId} and ${inDays(sql`rt.trading_day`)}`;
  await sql`insert into trade_trip_groups (account_id, trading_day, dimension, key, trips, fills, realized, fees, net, wins, losses, gross_win,
      gross_loss, largest_win, largest_loss, r_sum, r_count, risk_net, risk_sum)
    select ${accountId}::uuid, rt.trading_day,
      case when grouping(rt.side) = 0 then 'side' when grouping(rt.weekday) = 0 then 'weekday' when grouping(rt.hold) = 0 then 'holdTime' else 'all' end,
      coalesce(rt.side, rt.weekday, rt.hold, ''), ${sums}
    from (select *, ${dimension('weekday')} as weekday, ${dimension('holdTime')} as hold from trade_round_trips rt where ${mine}) rt
    group by grouping sets ((rt.trading_day), (rt.trading_day, rt.side), (rt.trading_day, rt.weekday), (rt.trading_day, rt.hold))
    union all
    select ${accountId}::uuid, rt.trading_day, 'tag', t.tag, ${sums}
    from trade_round_trips rt
    cross join lateral (select jsonb_array_elements_text(rt.tags) as tag union all select '' where rt.tags = '[]'::jsonb) t
    where ${mine}
    group by rt.trading_day, t.tag`.execute(trx);
}

/** How many trades an account holds (what deleting it takes with it). */
export async function countTrades(db: Db, accountId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from trades where account_id = ${accountId}`.execute(db);
  return rows[0]?.n ?? 0;
}

/** Stored trades without an externalId at these (symbol, instant) pairs: what an import matches rows without one against. */
export async function tradesAt(trx: Trx, accountId: string, at: readonly { symbol: string; executedAt: Date }[]): Promise<TradeRow[]> {
  if (at.length === 0) return [];
  const pairs = JSON.stringify(at.map((a) => ({ s: a.symbol, t: a.executedAt.toISOString() })));
  const { rows } = await sql<TradeRow>`select ${TRADE_COLUMNS} from trades
    where account_id = ${accountId} and external_id is null
      and (symbol, executed_at) in (select x.s, x.t from jsonb_to_recordset(${pairs}::jsonb) as x(s text, t timestamptz))`.execute(trx);
  return rows;
}
