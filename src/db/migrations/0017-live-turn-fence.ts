import { sql, type Kysely } from 'kysely';
import { installReserveTurnV4 } from './reserve-turn-v4.ts';

/**
 * DESIGN §12 "Under faults": the database is the fence of one live turn per user — reserve_turn v4
 * refuses a turn while another reply of the user is `streaming` with a recent sign of life on its
 * reservation, so a stream lease store that restarted empty cannot let two turns run. v4 takes a new
 * parameter: the v3 signature is dropped first. The fence's look at the user's streaming replies
 * uses messages_user_streaming_idx (0004).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`drop function if exists reserve_turn(text, text, uuid, timestamptz, text, boolean, bigint, integer, jsonb, text)`.execute(db);
  await installReserveTurnV4(db);
}
