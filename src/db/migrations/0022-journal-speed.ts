import { sql, type Kysely } from 'kysely';

/**
 * Trades keep half of each page free (fillfactor 50). A back-dated fill rewrites the FIFO outcome of
 * every later fill of its symbol (features/journal/record.ts); no outcome column is indexed, so each
 * such update can be a heap-only (HOT) update — the new version on the same page, no entry added to
 * the table's five indexes — but only where the page has room for it. On packed pages every update
 * went to another page and into every index: rewriting the outcomes of 100,000 fills cost about 7 s
 * on PostgreSQL, 0.9 s heap-only. The space left over by the old versions is reclaimed by the next
 * reader of the page (page pruning), which the embedded store, without autovacuum, relies on too.
 * Pages written before keep their fill until rewritten; a page's rows updated once move to pages that
 * have the room.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table trades set (fillfactor = 50)`.execute(db);
}
