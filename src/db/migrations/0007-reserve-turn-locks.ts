import type { Kysely } from 'kysely';
import { installReserveTurnV4 } from './reserve-turn-v4.ts';

/**
 * Replaced reserve_turn with v2, which locks an existing wallet row and month-usage row with
 * `select … for update` instead of rewriting them with an upsert. A fresh
 * database gets v4 here (reserve-turn-v4.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await installReserveTurnV4(db);
}
