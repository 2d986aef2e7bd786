import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §11: an assistant message keeps its tool calls and results, in order with its text, as
 * `parts` (jsonb). Null for a reply that is text only: its `content` is the whole of it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table messages add column parts jsonb`.execute(db);
}
