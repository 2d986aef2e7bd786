import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs queries as prepared statements, which take only one.
export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per admitted hit; no key, since two hits may share a millisecond.
  await sql`
    create table rate_limit_hits (
      bucket text not null,
      subject text not null,
      at timestamptz not null
    )
  `.execute(db);
  // Serves the per-subject delete of expired hits and the count/min/max of the rest.
  await sql`create index rate_limit_hits_window_idx on rate_limit_hits (bucket, subject, at)`.execute(db);
  // No foreign key to users: a lease is coordination state, not data a user owns.
  await sql`
    create table stream_leases (
      user_id text primary key,
      token text not null,
      expires_at timestamptz not null
    )
  `.execute(db);
}
