import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §14: trades (fills) of an account, and what the journal keeps on write so that a year's
 * journal reads a few hundred rows instead of every fill (features/journal/record.ts):
 * - on each fill, what FIFO matching made of it (realized P&L, the net of the round trip it closed,
 *   the symbol's position after it), rewritten from the first changed fill when an earlier fill of
 *   its symbol is added or deleted;
 * - trade_books: each symbol's open lots after its last fill, where the next fill continues;
 * - trade_days: each trading day's figures, recomputed for the days a write touched.
 * Money is `numeric` (exact); an account's trades, books and days go with it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table trades (
      id uuid primary key,
      account_id uuid not null references accounts(id) on delete cascade,
      symbol text not null,
      side text not null check (side in ('buy', 'sell')),
      quantity numeric not null check (quantity > 0),
      price numeric not null check (price >= 0),
      fee numeric not null check (fee >= 0),
      executed_at timestamptz not null,
      trading_day date not null,
      external_id text,
      import_key text,
      note text,
      tags jsonb not null,
      created_at timestamptz not null,
      realized_pnl numeric not null,
      trip_net numeric,
      position_quantity numeric not null,
      position_cost numeric not null,
      position_opened_at timestamptz
    )`.execute(db);
  await sql`create unique index trades_external_id_uq on trades (account_id, external_id) where external_id is not null`.execute(db);
  await sql`create unique index trades_import_key_uq on trades (account_id, import_key) where import_key is not null`.execute(db);
  // The list and the export (newest first), a symbol's replay and its position at an instant, a day's fills.
  await sql`create index trades_account_time_idx on trades (account_id, executed_at, id)`.execute(db);
  await sql`create index trades_account_symbol_idx on trades (account_id, symbol, executed_at, id)`.execute(db);
  await sql`create index trades_account_day_idx on trades (account_id, trading_day)`.execute(db);
  await sql`
    create table trade_books (
      account_id uuid not null references accounts(id) on delete cascade,
      symbol text not null,
      book jsonb not null,
      primary key (account_id, symbol)
    )`.execute(db);
  await sql`
    create table trade_days (
      account_id uuid not null references accounts(id) on delete cascade,
      trading_day date not null,
      realized_pnl numeric not null,
      fees numeric not null,
      fills integer not null,
      round_trips integer not null,
      wins integer not null,
      losses integer not null,
      gross_win numeric not null,
      gross_loss numeric not null,
      largest_win numeric,
      largest_loss numeric,
      last_executed_at timestamptz not null,
      last_id uuid not null,
      primary key (account_id, trading_day)
    )`.execute(db);
}
