import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §10: a running turn stamps its reservation as alive (with the stream's heartbeat), so the
 * reservation sweeper tells a crashed turn (no sign of life for RESERVATION_SWEEP_AFTER_MS) from a
 * long one, however long it runs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table turn_charges add column alive_at timestamptz`.execute(db);
}
