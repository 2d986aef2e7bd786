import { sql, type Kysely } from 'kysely';

/**
 * Conversation search documents are stored uncompressed (STORAGE EXTERNAL: out of line when large,
 * never compressed). The merge of a turn's words (conversations repo, MERGE_WORDS) checks the two
 * documents' sizes before it concatenates them, since a tsvector past 1 MB raises and would fail the
 * statement that stores the turn's end; a compressed document's stored size said far less than its
 * real one, so a document of compressible words could pass the check and fail the turn. Uncompressed,
 * the size checked is the size concatenated; and a turn's end no longer compresses the document again.
 * The documents stored compressed are rewritten (a concatenation makes a new value), so none stays so.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table conversation_search alter column document set storage external`.execute(db);
  await sql`update conversation_search set document = document || ''::tsvector
    where pg_column_compression(document) is not null`.execute(db);
}
