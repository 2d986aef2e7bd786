import type { Kysely } from 'kysely';
import { installReserveTurnV4 } from './reserve-turn-v4.ts';

/**
 * Created reserve_turn: a turn's billing reservation (DESIGN §8) as one database function, so a
 * stream start reads it inside the statement that stores the turn instead of running a transaction
 * of its own. A fresh database gets v4 here (reserve-turn-v4.ts); a database that ran it
 * when it was new got v1.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await installReserveTurnV4(db);
}
