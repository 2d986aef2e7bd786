import type { Kysely } from 'kysely';
import { installReserveTurnV4 } from './reserve-turn-v4.ts';

/**
 * Installs reserve_turn v3 on a database that ran 0006 and 0007: the tier fallback and the ledger
 * append become the functions user_tier and ledger_append, which reserve_turn and the TypeScript
 * (users' userTier, billing's appendEntry) both call. A fresh
 * database gets v4 here (reserve-turn-v4.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await installReserveTurnV4(db);
}
