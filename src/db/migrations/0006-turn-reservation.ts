import type { Kysely } from 'kysely';
import { installReserveTurn } from '../../features/billing/reserve-turn-function.ts';

/**
 * Created reserve_turn: a turn's billing reservation (DESIGN §8) as one database function, so a
 * stream start reads it inside the statement that stores the turn instead of running a transaction
 * of its own. Its source lives in features/billing/reserve-turn-function.ts; like every migration
 * that installs it, this one installs the current text (on a database that ran it, it installed v1).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await installReserveTurn(db);
}
