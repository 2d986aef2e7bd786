import { sql, type RawBuilder, type Selectable } from 'kysely';
import type { Cte } from '../../db/cte.ts';
import type { AttachmentsTable, ConversationsTable, Db, MessagesTable, Trx } from '../../db/types.ts';

export type ConversationRow = Selectable<ConversationsTable>;
export type MessageRow = Selectable<MessagesTable>;
type AttachmentRow = Selectable<AttachmentsTable>;
export type AttachmentMeta = Pick<AttachmentRow, 'id' | 'message_id' | 'format' | 'byte_size'>;

/** updated_at with the database's full (microsecond) precision, so a cursor names a row exactly. */
const EXACT_UPDATED_AT = sql<string>`to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A timestamp as the API shows it (ISO 8601, UTC, milliseconds truncated, as Date#toISOString). */
const iso = (column: 'last_message_at' | 'created_at' | 'updated_at'): RawBuilder<string> =>
  sql<string>`to_char(${sql.ref(column)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** One page of the list: its items as ConversationListItem JSON, and where the next page starts. */
interface ConversationPage {
  /** A JSON array of ConversationListItem, written by the database. */
  readonly itemsJson: string;
  /** The (exact updatedAt, id) of the page's last item when another page follows. */
  readonly next: { readonly updatedAt: string; readonly id: string } | undefined;
}

/**
 * One page of a user's conversations, newest first; `after` is the (updatedAt, id) of the last row
 * seen. The database writes the page as JSON in the API's shape: one string back instead of a row
 * object, three Dates and a re-serialization per item, on the service's most frequent read.
 */
export async function listConversationsPage(
  db: Db,
  userId: string,
  limit: number,
  after: { updatedAt: string; id: string } | undefined,
  terms?: string,
): Promise<ConversationPage> {
  const result = await conversationPageQuery(userId, limit, after, terms).execute(db);
  const row = result.rows[0];
  if (!row) throw new Error('the list query returned no row');
  const next = row.more && row.last_exact !== null && row.last_id !== null ? { updatedAt: row.last_exact, id: row.last_id } : undefined;
  return { itemsJson: row.items, next };
}

/**
 * The statement behind listConversationsPage. Exported for bench/scenarios/list.ts: its baseline is this
 * very statement sent straight to PostgreSQL, and a copy there would stop measuring the service's.
 * With `terms` (a tsquery, search.ts) only the conversations whose search document matches are listed.
 */
export function conversationPageQuery(
  userId: string,
  limit: number,
  after: { updatedAt: string; id: string } | undefined,
  terms?: string,
): RawBuilder<{ items: string; last_exact: string | null; last_id: string | null; more: boolean }> {
  const afterRow = after ? sql`and (updated_at, id) < (${after.updatedAt}::timestamptz, ${after.id}::uuid)` : sql``;
  const page =
    terms === undefined
      ? sql`select *, row_number() over (order by updated_at desc, id desc) as n
      from conversations
      where user_id = ${userId} ${afterRow}
      order by updated_at desc, id desc
      limit ${limit + 1}`
      : sql`select c.*, row_number() over (order by c.updated_at desc, c.id desc) as n
      from conversations c join hits h on h.id = c.id
      order by c.updated_at desc, c.id desc`;
  return sql<{ items: string; last_exact: string | null; last_id: string | null; more: boolean }>`
    ${terms === undefined ? sql`` : searchHits(userId, limit, afterRow, terms)}
    select
      coalesce(json_agg(json_build_object(
        'id', id, 'title', title, 'provider', provider, 'model', model, 'personaId', persona_id,
        'messageCount', message_count, 'lastMessageAt', ${iso('last_message_at')}, 'createdAt', ${iso('created_at')},
        'updatedAt', ${iso('updated_at')}
      ) order by n) filter (where n <= ${limit}), '[]')::text as items,
      max(${EXACT_UPDATED_AT}) filter (where n = ${limit}) as last_exact,
      max(id::text) filter (where n = ${limit}) as last_id,
      count(*) > ${limit} as more
    from (${page}) page`;
}

/** The user's conversations probed one by one, newest first, before the search index is asked (searchHits). */
const SEARCH_PROBED = 200;

/**
 * `hits`: the ids (and updatedAt) of the user's matching conversations, at least `limit + 1` of the
 * newest when there are that many. Two ways, chosen by the data rather than by the planner (a prepared
 * statement's generic plan cannot tell a word in every conversation from a word in none):
 * - `near`: the user's SEARCH_PROBED newest conversations, each document checked — enough on its own
 *   when the words are common (it then holds limit + 1 matches);
 * - `far`, only when `near` falls short and the user has older conversations: the search index, asked
 *   for documents holding the words and the owner's mark (GIN intersects the two, so a word common
 *   among other users costs nothing here), then their conversations older than the probed ones.
 */
function searchHits(userId: string, limit: number, afterRow: RawBuilder<unknown>, terms: string): RawBuilder<unknown> {
  return sql`with recent as materialized (
      select id, updated_at from conversations where user_id = ${userId} ${afterRow}
      order by updated_at desc, id desc limit ${SEARCH_PROBED}),
    near as materialized (
      select r.id, r.updated_at from recent r join conversation_search s on s.conversation_id = r.id
      where s.document @@ to_tsquery('simple', ${terms})),
    far as materialized (
      select conversation_id from conversation_search
      where (select count(*) from near) <= ${limit} and (select count(*) from recent) = ${SEARCH_PROBED}
        and document @@ (to_tsquery('simple', ${terms}) && ${ownerTerm(userId)})),
    hits as (
      select id from (
        select id, updated_at from near
        union all
        select c.id, c.updated_at from far join conversations c on c.id = far.conversation_id
        where c.user_id = ${userId} and (c.updated_at, c.id) < (select updated_at, id from recent order by updated_at, id limit 1)
      ) matched
      order by updated_at desc, id desc limit ${limit + 1})`;
}

/**
 * Characters of text made into words at once (a turn's, or a conversation's when migration 0019 made
 * its first document): to_tsvector of this many stays far below a tsvector's 1 MB.
 */
const SEARCH_INDEXED_CHARS = 100_000;
/** Words a search document holds at most (a tsvector holds at most 1 MB); a turn's new words past them are not added. */
const SEARCH_MAX_WORDS = 50_000;
/** Bytes two documents may hold together before a merge (a tsvector's text part holds at most 1 MB). */
const SEARCH_MAX_BYTES = 900_000;

/** The owner's mark, as a document lexeme and as a query term: `u` and the md5 of the user id (letters and digits only). */
export const ownerMark = (userId: RawBuilder<unknown> | string) => sql<string>`('u' || md5(${userId}))::tsvector`;
const ownerTerm = (userId: string) => sql<string>`('u' || md5(${userId}))::tsquery`;

/**
 * A text's words as a search document holds them: as the 'simple' configuration splits them (lower
 * case, no stemming, no stop words — tickers and any language are words), positions dropped.
 */
export const searchWords = (text: RawBuilder<unknown>) => sql<string>`strip(to_tsvector('simple', left(${text}, ${SEARCH_INDEXED_CHARS})))`;

/** A search document: the text's words and the owner's mark. Migration 0019 builds the first documents with it. */
export function searchDocument(userId: RawBuilder<unknown>, text: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`(${searchWords(text)} || ${ownerMark(userId)})`;
}

/**
 * Words are only ever added to a document (a merge): nothing is written when they add none, or would
 * take it past SEARCH_MAX_WORDS — or near a tsvector's 1 MB, checked first (CASE keeps the order), so
 * the merge never raises: it is a part of the statement that stores a turn's end.
 */
const MERGE_WORDS = sql`on conflict (conversation_id) do update set document = conversation_search.document || excluded.document
    where case when pg_column_size(conversation_search.document) + pg_column_size(excluded.document) < ${SEARCH_MAX_BYTES}
      then conversation_search.document || excluded.document <> conversation_search.document
        and length(conversation_search.document || excluded.document) <= ${SEARCH_MAX_WORDS}
      else false end`;

/**
 * Adds an ending turn's words (its user message, its reply `content`, the title) to its conversation's
 * search document, as a part of the statement that ends the reply: it reads that statement's `ended`
 * CTE, so a retried statement adds nothing twice, and the words are there once the client has the end.
 */
export function turnWords(content: RawBuilder<unknown>, replyId: string, ended: Cte<'ended'>): RawBuilder<never> {
  return sql<never>`insert into conversation_search (conversation_id, document)
    select c.id, ${searchDocument(sql`c.user_id`, sql`c.title || ' ' || coalesce(u.content, '') || ' ' || ${content}`)}
    from ${ended.ref}, messages r join conversations c on c.id = r.conversation_id
    left join messages u on u.conversation_id = r.conversation_id and u.seq = r.seq - 1
    where r.id = ${replyId}
    ${MERGE_WORDS}`;
}

/** Adds a new title's words to its conversation's search document (the old title's stay: see the decisions). */
export async function indexTitle(db: Db, conversationId: string): Promise<void> {
  await sql`insert into conversation_search (conversation_id, document)
    select c.id, ${searchDocument(sql`c.user_id`, sql`c.title`)} from conversations c where c.id = ${conversationId}
    ${MERGE_WORDS}`.execute(db);
}

/** The provider of the user's conversation `id`, as an expression of another statement (null when it is not the user's). */
export function conversationProvider(userId: string, id: string): RawBuilder<string> {
  return sql<string>`(select provider from conversations where id = ${id} and user_id = ${userId})`;
}

export function findConversation(db: Db | Trx, userId: string, id: string): Promise<ConversationRow | undefined> {
  return db.selectFrom('conversations').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
}

export function renameConversation(db: Db, userId: string, id: string, title: string, now: Date): Promise<ConversationRow | undefined> {
  return db.updateTable('conversations').set({ title, updated_at: now }).where('id', '=', id).where('user_id', '=', userId).returningAll().executeTakeFirst();
}

export async function deleteConversation(db: Db, userId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('conversations').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return r.numDeletedRows > 0n;
}

/**
 * DESIGN §12: whether the user has this conversation (`found`), and its latest reply (the turn a
 * client attaches to or stops), in one read.
 */
export async function latestReply(db: Db, userId: string, conversationId: string): Promise<{ found: boolean; reply: MessageRow | undefined }> {
  const { rows } = await sql<MessageRow>`
    select m.* from conversations c
    left join lateral (
      select * from messages where conversation_id = c.id and role = 'assistant' order by seq desc limit 1) m on true
    where c.id = ${conversationId} and c.user_id = ${userId}`.execute(db);
  const row = rows[0];
  if (row === undefined) return { found: false, reply: undefined };
  return { found: true, reply: row.id === null ? undefined : row };
}

export function findMessage(db: Db, id: string): Promise<MessageRow | undefined> {
  return db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();
}

/** A page of a conversation's messages, newest first, below `beforeSeq` when given. */
export function listMessages(db: Db, conversationId: string, limit: number, beforeSeq: number | undefined): Promise<MessageRow[]> {
  let q = db.selectFrom('messages').selectAll().where('conversation_id', '=', conversationId);
  if (beforeSeq !== undefined) q = q.where('seq', '<', beforeSeq);
  return q.orderBy('seq', 'desc').limit(limit).execute();
}

export function attachmentsOf(db: Db, messageIds: readonly string[]): Promise<AttachmentMeta[]> {
  if (messageIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('attachments')
    .select(['id', 'message_id', 'format', 'byte_size'])
    .where('message_id', 'in', messageIds)
    .orderBy('message_id')
    .orderBy('position')
    .execute();
}

export function findAttachment(db: Db, userId: string, id: string): Promise<Pick<AttachmentRow, 'format' | 'data'> | undefined> {
  return db.selectFrom('attachments').select(['format', 'data']).where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
}

export interface PriorTurn {
  user: MessageRow;
  /** The reply (seq + 1); absent only if its row was never written. */
  reply: MessageRow | undefined;
  provider: string;
  model: string;
}

/** The turn a client message id already started, for idempotent retries (DESIGN §7). */
export async function findTurnByClientId(db: Db, userId: string, clientMessageId: string): Promise<PriorTurn | undefined> {
  const user = await db.selectFrom('messages').selectAll().where('user_id', '=', userId).where('client_message_id', '=', clientMessageId).executeTakeFirst();
  return user ? priorTurnOf(db, user) : undefined;
}

/** The turn a stored user message opened: its reply and its conversation's provider and model. */
async function priorTurnOf(db: Db, user: MessageRow): Promise<PriorTurn> {
  const [reply, conversation] = await Promise.all([
    db
      .selectFrom('messages')
      .selectAll()
      .where('conversation_id', '=', user.conversation_id)
      .where('seq', '=', user.seq + 1)
      .executeTakeFirst(),
    db.selectFrom('conversations').select(['provider', 'model']).where('id', '=', user.conversation_id).executeTakeFirstOrThrow(),
  ]);
  return { user, reply, provider: conversation.provider, model: conversation.model };
}

/** A conversation's last turn: its user message and its reply (absent only if its row was never written). */
export async function lastTurn(db: Db, conversationId: string): Promise<{ user: MessageRow; reply: MessageRow | undefined } | undefined> {
  const rows = await db.selectFrom('messages').selectAll().where('conversation_id', '=', conversationId).orderBy('seq', 'desc').limit(2).execute();
  const user = rows.find((m) => m.role === 'user');
  if (!user) return undefined;
  return { user, reply: rows.find((m) => m.role === 'assistant' && m.seq === user.seq + 1) };
}

/** How a reply left `streaming` by its instance is closed (the crash sweeper), and ended by a live turn that could not store its own end. */
export const STREAMING_LEFT_BEHIND = { status: 'interrupted', error_code: 'SHUTTING_DOWN', error_retryable: true } as const;

/** What a crashed turn's frame log holds of its reply (DESIGN §12 "Under faults"). */
export interface CrashedReply {
  readonly content: string;
  /** The reply's parts as JSON text (parts.ts), null for a text-only reply. */
  readonly parts: string | null;
}

/**
 * The terminal frame id of a reply closed for a crashed instance (the largest `int`), its snapshot
 * one below. A client may hold frames the dead instance sent it but never wrote to the log: whatever
 * it holds, a resume sends it the stored reply as a snapshot, then the end, with ids above its own —
 * and a client that has had that end is answered 204.
 */
export const CRASHED_TERMINAL_ID = 2_147_483_647;

/** A crashed turn's reply as closeCrashedReply left it: whether it holds anything, and where its usage is counted. */
interface ClosedCrashedReply {
  readonly produced: boolean;
  readonly userId: string;
  readonly provider: string;
  readonly model: string;
}

/**
 * A turn whose instance is gone (DESIGN §10, §12): its reply, if still 'streaming', is closed
 * interrupted with what its frame log holds (`fromLog`; undefined when the log is gone); returns
 * whether the reply holds anything (text or tool calls) — how the turn is settled — and its
 * conversation's provider and model; undefined when the reply was deleted with its conversation.
 */
export async function closeCrashedReply(db: Db, replyId: string, now: Date, fromLog: CrashedReply | undefined): Promise<ClosedCrashedReply | undefined> {
  const logged = fromLog ? sql`, content = ${fromLog.content}, parts = ${fromLog.parts}::jsonb` : sql``;
  // A data-modifying CTE runs whether or not it is read; the outer select sees the reply as it was before.
  const { rows } = await sql<{ produced: boolean; user_id: string; provider: string; model: string }>`
    with closed as (
      update messages set status = ${STREAMING_LEFT_BEHIND.status}, error_code = ${STREAMING_LEFT_BEHIND.error_code},
        error_retryable = ${STREAMING_LEFT_BEHIND.error_retryable}, completed_at = ${now}, last_frame_id = ${CRASHED_TERMINAL_ID}${logged}
      where id = ${replyId} and status = 'streaming'
      returning (content <> '' or parts is not null) as produced)
    select coalesce((select produced from closed), m.content <> '' or m.parts is not null) as produced, m.user_id, c.provider, c.model
    from messages m join conversations c on c.id = m.conversation_id where m.id = ${replyId}`.execute(db);
  const row = rows[0];
  return row && { produced: row.produced, userId: row.user_id, provider: row.provider, model: row.model };
}
