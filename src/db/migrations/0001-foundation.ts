import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs queries as prepared statements, which take only one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table users (
      id text primary key,
      tier text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table brokerages (
      id uuid primary key,
      user_id text not null references users(id) on delete cascade,
      name text not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index brokerages_user_idx on brokerages (user_id, created_at)`.execute(db);
  await sql`
    create table accounts (
      id uuid primary key,
      user_id text not null references users(id) on delete cascade,
      name text not null,
      currency text not null,
      timezone text not null,
      brokerage_id uuid references brokerages(id) on delete set null,
      starting_balance numeric not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`.execute(db);
  // The database, not the service, keeps names unique per user, case-insensitively.
  await sql`create unique index accounts_user_name_uq on accounts (user_id, lower(name))`.execute(db);
  await sql`create index accounts_user_idx on accounts (user_id, created_at)`.execute(db);
  await sql`create index accounts_brokerage_idx on accounts (brokerage_id)`.execute(db);
  await sql`
    create table account_timezones (
      account_id uuid not null references accounts(id) on delete cascade,
      timezone text not null,
      effective_from timestamptz not null,
      primary key (account_id, effective_from)
    )`.execute(db);
}
