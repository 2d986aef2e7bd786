import type { Kysely } from 'kysely';
import { installReserveTurn } from '../../features/billing/reserve-turn-function.ts';

/**
 * Replaced reserve_turn with v2, which locks an existing wallet row and month-usage row with
 * `select … for update` instead of rewriting them with an upsert. The text
 * lives in features/billing/reserve-turn-function.ts; this installs the current one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await installReserveTurn(db);
}
