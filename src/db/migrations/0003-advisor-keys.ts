import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs queries as prepared statements, which take only one.
// Each key row stores exactly what DESIGN §5 allows: key id, nonce, ciphertext, tag, last-4 hint.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table provider_keys (
      user_id text not null references users(id) on delete cascade,
      provider text not null,
      key_id text not null,
      nonce bytea not null,
      ciphertext bytea not null,
      tag bytea not null,
      key_hint_tail text not null,
      default_model text not null,
      active boolean not null,
      last_verified_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      primary key (user_id, provider)
    )`.execute(db);
  // DESIGN §6: at most one active key per user, held by the database rather than by care.
  await sql`create unique index provider_keys_one_active_uq on provider_keys (user_id) where active`.execute(db);
  // Rewrap finds the rows still under an older key without reading every row.
  await sql`create index provider_keys_key_id_idx on provider_keys (key_id)`.execute(db);
  await sql`
    create table market_data_keys (
      user_id text primary key references users(id) on delete cascade,
      provider text not null,
      key_id text not null,
      nonce bytea not null,
      ciphertext bytea not null,
      tag bytea not null,
      key_hint_tail text not null,
      last_verified_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`.execute(db);
  await sql`create index market_data_keys_key_id_idx on market_data_keys (key_id)`.execute(db);
}
