import { sql, type Kysely, type RawBuilder } from 'kysely';

/**
 * The search document as conversations' repo built it when this migration ran: the first 100,000
 * characters' words (`simple` configuration, positions stripped) and the owner's mark. Frozen here: a
 * later rule ships as a new migration.
 */
function searchDocument(userId: RawBuilder<unknown>, text: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`(strip(to_tsvector('simple', left(${text}, ${100_000}))) || ('u' || md5(${userId}))::tsvector)`;
}

/**
 * Conversation search (GET /api/advisor/conversations?q=): one search document per conversation — its
 * words as a tsvector, with its owner's mark — under a GIN index. Full-text search is core PostgreSQL,
 * so the same migration runs on PGlite and on any PostgreSQL without an extension. The documents of
 * the conversations there already are made here from their titles and messages.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table conversation_search (
      conversation_id uuid primary key references conversations(id) on delete cascade,
      document tsvector not null
    )`.execute(db);
  await sql`
    insert into conversation_search (conversation_id, document)
    select c.id, ${searchDocument(sql`c.user_id`, sql`c.title || ' ' || coalesce(string_agg(m.content, ' ' order by m.seq), '')`)}
    from conversations c left join messages m on m.conversation_id = c.id
    group by c.id`.execute(db);
  await sql`create index conversation_search_document_idx on conversation_search using gin (document)`.execute(db);
}
