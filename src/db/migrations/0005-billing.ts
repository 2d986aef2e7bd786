import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs queries as prepared statements, which take only one.
// Users are never deleted while they hold money records, so these keys restrict rather than cascade.
export async function up(db: Kysely<unknown>): Promise<void> {
  // The cached balance: written only in the transaction that appends the ledger entry it reflects.
  await sql`
    create table wallets (
      user_id text primary key references users(id),
      balance bigint not null default 0,
      updated_at timestamptz not null default now()
    )`.execute(db);
  // seq orders entries (many share a timestamp); reference makes every entry idempotent.
  await sql`
    create table ledger_entries (
      seq bigint generated always as identity primary key,
      id uuid not null unique,
      user_id text not null references users(id),
      amount bigint not null check (amount <> 0),
      kind text not null check (kind in ('purchase', 'turn', 'turn-return', 'refund', 'grant')),
      reference text not null unique,
      note text,
      created_at timestamptz not null
    )`.execute(db);
  await sql`create index ledger_entries_user_idx on ledger_entries (user_id, seq)`.execute(db);
  // Append-only in the database itself, whatever code or operator touches the table.
  await sql`
    create function ledger_entries_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'ledger_entries is append-only: % refused', tg_op using errcode = 'P0001';
    end
    $$`.execute(db);
  await sql`
    create trigger ledger_entries_no_change before update or delete on ledger_entries
    for each row execute function ledger_entries_append_only()`.execute(db);
  await sql`
    create trigger ledger_entries_no_truncate before truncate on ledger_entries
    for each statement execute function ledger_entries_append_only()`.execute(db);
  // Allowance turns and images used per calendar month (UTC), 'YYYY-MM'.
  await sql`
    create table monthly_usage (
      user_id text not null references users(id),
      month text not null,
      allowance_turns integer not null default 0 check (allowance_turns >= 0),
      images integer not null default 0 check (images >= 0),
      primary key (user_id, month)
    )`.execute(db);
  await sql`
    create table turn_charges (
      turn_id text primary key,
      user_id text not null references users(id),
      source text not null check (source in ('allowance', 'credits', 'free')),
      credits bigint not null check (credits >= 0),
      images integer not null check (images >= 0),
      month text not null,
      status text not null check (status in ('reserved', 'charged', 'returned')),
      created_at timestamptz not null,
      settled_at timestamptz
    )`.execute(db);
  await sql`create index turn_charges_reserved_idx on turn_charges (created_at) where status = 'reserved'`.execute(db);
  // Credits and amount are fixed when the checkout starts; a later catalogue change does not alter them.
  await sql`
    create table purchases (
      id uuid primary key,
      user_id text not null references users(id),
      pack_id text not null,
      credits bigint not null check (credits > 0),
      amount bigint not null check (amount > 0),
      currency text not null,
      session_id text not null unique,
      payment_intent text,
      status text not null check (status in ('pending', 'paid')),
      created_at timestamptz not null,
      paid_at timestamptz
    )`.execute(db);
  await sql`create index purchases_user_idx on purchases (user_id, created_at)`.execute(db);
  await sql`create index purchases_payment_intent_idx on purchases (payment_intent)`.execute(db);
}
