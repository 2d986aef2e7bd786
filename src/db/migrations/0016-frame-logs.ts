import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §12: frame logs of live turns, for deployments with PostgreSQL and no Redis (a row per
 * frame, an expiry per log; notices go by LISTEN/NOTIFY). A reply keeps the id of its stream's
 * terminal frame, so a client resuming after the log has gone gets frame ids that follow what it had.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table stream_logs (turn_id uuid primary key, expires_at timestamptz not null)`.execute(db);
  await sql`create index stream_logs_expiry_idx on stream_logs (expires_at)`.execute(db);
  await sql`
    create table stream_frames (
      turn_id uuid not null references stream_logs(turn_id) on delete cascade,
      id integer not null,
      wire text not null,
      terminal boolean not null default false,
      primary key (turn_id, id)
    )`.execute(db);
  await sql`alter table messages add column last_frame_id integer`.execute(db);
}
