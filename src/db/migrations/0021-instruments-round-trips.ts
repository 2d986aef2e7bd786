import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §17: instruments and round trips.
 * - trades gain `asset_class`, `multiplier` (existing fills: stock ×1, which is what their P&L assumed)
 *   and `stop_price` (a fill's planned stop; an opening fill's stop makes its round trip's risk);
 * - trade_round_trips: each closed round trip of a symbol, kept on write like trade_days
 *   (features/journal/record.ts), read by the round-trips list, the reports and the what-ifs;
 * - trade_books.version: a book written before round trips were kept is version 1 and has none; the
 *   service replays such symbols once at start (journal/rebuild.ts), under the account's row lock.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table trades
    add column asset_class text not null default 'stock'
      check (asset_class in ('stock', 'future', 'option', 'forex', 'crypto', 'cfd')),
    add column multiplier numeric not null default 1 check (multiplier > 0),
    add column stop_price numeric check (stop_price >= 0)`.execute(db);
  await sql`alter table trade_books add column version integer not null default 1`.execute(db);
  await sql`
    create table trade_round_trips (
      id uuid not null,
      account_id uuid not null references accounts(id) on delete cascade,
      symbol text not null,
      side text not null check (side in ('long', 'short')),
      asset_class text not null,
      multiplier numeric not null,
      opened_at timestamptz not null,
      closed_at timestamptz not null,
      opening_day date not null,
      trading_day date not null,
      open_hour smallint not null,
      max_quantity numeric not null,
      entry_average numeric not null,
      exit_average numeric not null,
      realized_pnl numeric not null,
      fees numeric not null,
      net_pnl numeric not null,
      initial_risk numeric,
      r_multiple numeric,
      hold_seconds bigint not null,
      fills integer not null,
      tags jsonb not null,
      primary key (account_id, id)
    )`.execute(db);
  await sql`create index trade_round_trips_close_idx on trade_round_trips (account_id, closed_at, id)`.execute(db);
  await sql`create index trade_round_trips_day_idx on trade_round_trips (account_id, trading_day)`.execute(db);
  await sql`create index trade_round_trips_symbol_idx on trade_round_trips (account_id, symbol, closed_at, id)`.execute(db);
}
