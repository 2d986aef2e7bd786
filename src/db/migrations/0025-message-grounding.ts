import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §18: a reply's grounding check (its figures, which a source held, which none did) is stored
 * with it. Null for a reply stored before the check, and for one the crash sweeper closed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table messages add column grounding jsonb`.execute(db);
}
