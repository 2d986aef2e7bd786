import { sql, type RawBuilder, type Selectable } from 'kysely';
import { cte, type Cte } from '../../db/cte.ts';
import type { AttachmentsTable, ConversationsTable, Db, MessagesTable, Trx } from '../../db/types.ts';
import { globToLike } from '../../model-glob.ts';
import type { ChargeRow } from '../billing/turn-billing.ts';
import type { Receipt } from '../usage/receipt.ts';
import type { ClosingCtes, UsagePart } from '../usage/service.ts';

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
function turnWords(content: RawBuilder<unknown>, replyId: string, ended: Cte<'ended'>): RawBuilder<never> {
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

export interface HistoryRow {
  role: 'user' | 'assistant';
  content: string;
  images: number;
  /** A reply's stored parts (parts.ts), null when it is text only. */
  parts: unknown;
}

/**
 * The latest messages whose text fits in `budget` characters together, unordered (with `seq`): the budget is
 * filled from the newest message back and the first that does not fit ends it. A reply with tool
 * calls counts its parts' JSON (a call and its result are one message: kept or dropped together).
 * Empty replies carry nothing and are skipped.
 */
function historyQuery(conversation: RawBuilder<unknown>, budget: number): RawBuilder<unknown> {
  return sql`
    select role, content, images, parts, seq from (
      select m.role, m.content, m.seq, m.parts,
             (select count(*)::int from attachments a where a.message_id = m.id) as images,
             sum(coalesce(char_length(m.parts::text), char_length(m.content))) over (order by m.seq desc) as running
      from messages m
      where m.conversation_id = ${conversation} and (m.role = 'user' or m.content <> '' or m.parts is not null)
    ) h
    where running <= ${budget}`;
}

/** A conversation's last turn: its user message and its reply (absent only if its row was never written). */
export async function lastTurn(db: Db, conversationId: string): Promise<{ user: MessageRow; reply: MessageRow | undefined } | undefined> {
  const rows = await db.selectFrom('messages').selectAll().where('conversation_id', '=', conversationId).orderBy('seq', 'desc').limit(2).execute();
  const user = rows.find((m) => m.role === 'user');
  if (!user) return undefined;
  return { user, reply: rows.find((m) => m.role === 'assistant' && m.seq === user.seq + 1) };
}

/**
 * Removes a conversation's last turn (`user`, and its reply and images with it) and gives its numbers
 * back, in the caller's transaction, so the turn stored next takes its place; a title that was the
 * replaced first message's becomes the new one's.
 */
async function dropLastTurn(trx: Trx, conversationId: string, user: MessageRow, titles: { replaced: string; next: string }): Promise<void> {
  await sql`with gone as (delete from messages where conversation_id = ${conversationId} and seq >= ${user.seq} returning 1)
    update conversations set message_count = message_count - (select count(*)::int from gone),
      title = case when ${user.seq}::int = 1 and title = ${titles.replaced} then ${titles.next} else title end
    where id = ${conversationId}`.execute(trx);
}

/** How a reply left `streaming` by its instance is closed (the crash sweeper), and ended by a live turn that could not store its own end. */
export const STREAMING_LEFT_BEHIND = { status: 'interrupted', error_code: 'SHUTTING_DOWN', error_retryable: true } as const;

/** A turn's start, as its one statement (`startTurn`) is given it. */
export interface TurnStart {
  readonly now: Date;
  readonly userId: string;
  /** The conversation the turn continues; undefined: it starts `conversationId` (titled `title`). */
  readonly target: string | undefined;
  readonly conversationId: string;
  readonly title: string;
  /** The request's persona (undefined: a new conversation has none, an existing one keeps its own). */
  readonly personaId: string | undefined;
  readonly userMessage: { id: string; content: string; clientMessageId: string };
  readonly replyId: string;
  readonly attachments: readonly { id: string; format: 'png' | 'jpeg' | 'webp'; data: Buffer }[];
  /** Whether the request holds its user's stream lease (the admission's answer). */
  readonly leaseHeld: boolean;
  /**
   * The provider key as this instance last read it for the user (its sealed columns) and whether it
   * opened; undefined: none known. The turn starts only on the very key it names: another stored
   * since (or none known) is answered KEY_CHANGED, for the caller to read and open first.
   */
  readonly key: { readonly sealed: KnownKey; readonly opens: boolean } | undefined;
  /** The catalogue's models (`catalogueRows`). */
  readonly catalogue: RawBuilder<unknown>;
  /** The context budget in characters (the history sent is what fits). */
  readonly historyBudget: number;
}

/** A provider key as sealed: what a start statement compares byte for byte with the stored one. */
interface KnownKey {
  readonly key_id: string;
  readonly nonce: Uint8Array;
  readonly ciphertext: Uint8Array;
  readonly tag: Uint8Array;
}

/** The start statement's CTE of the chosen model's terms `(allowance, cost)`, which billing's part reads (turn-billing `reserveWithin`). */
export const TERMS = cte('terms');

/** The parts other features add to a turn's start statement. */
interface StartingParts {
  /**
   * The keys feature's: the turn's key rows (`kind` 'provider' and 'market', TurnKeyRow's columns);
   * the provider key is the active one, or that of the provider the `target` CTE holds.
   */
  readonly keys: (provider: RawBuilder<string> | null) => RawBuilder<unknown>;
  /** Billing's: reads the `TERMS` CTE (the chosen model's allowance and cost; no row: nothing is reserved). */
  readonly reservation: RawBuilder<ChargeRow>;
}

/** Why a start statement stored nothing, in the order the checks apply (DESIGN §7); billing's refusals are raised. */
type StartRefusal =
  | 'CONVERSATION_NOT_FOUND'
  | 'CLIENT_MESSAGE_ID_SEEN'
  | 'PROVIDER_KEY_NOT_CONFIGURED'
  | 'PROVIDER_KEY_DECRYPTION_FAILED'
  | 'KEY_CHANGED'
  | 'IMAGES_NOT_SUPPORTED'
  | 'STREAM_IN_PROGRESS'
  | 'MODEL_NOT_AVAILABLE';

/** What a start statement answers: a refusal, or the turn started (the charge, its provider and model, its keys and history). */
export interface StartRow {
  readonly refusal: StartRefusal | null;
  readonly source: string | null;
  readonly credits: number | null;
  /** The turn's provider and model: the conversation's, or a new one's from the active key (null: no key). */
  readonly provider: string | null;
  readonly model: string | null;
  /** The persona the turn runs with. */
  readonly persona_id: string | null;
  /** The provider key's and the market-data key's rows (undefined: none stored). */
  readonly p_key_id: string | null;
  readonly p_nonce: Uint8Array | null;
  readonly p_ciphertext: Uint8Array | null;
  readonly p_tag: Uint8Array | null;
  readonly p_default_model: string | null;
  readonly m_provider: string | null;
  readonly m_key_id: string | null;
  readonly m_nonce: Uint8Array | null;
  readonly m_ciphertext: Uint8Array | null;
  readonly m_tag: Uint8Array | null;
  /** The conversation's earlier turns that fit the context budget, oldest first (none for a new conversation). */
  readonly history: HistoryRow[];
}

/**
 * The catalogue's models as a start statement reads them: a `VALUES` list of constants, written into the
 * statement's text (prepared once per connection with it, nothing sent or parsed per turn), its `*` globs as
 * LIKE patterns, in order (the first match wins, as findModel). Operator configuration, quoted as literals.
 */
export function catalogueRows(
  models: readonly { provider: string; match: string; allowance: boolean; creditsPerTurn: number; images?: boolean }[],
): RawBuilder<unknown> {
  const rows = models.map(
    (m, ord) =>
      sql`(${sql.lit(ord)}, ${sql.lit(m.provider)}, ${sql.lit(globToLike(m.match))}, ${sql.lit(m.allowance)}, ${sql.lit(m.creditsPerTurn)}::bigint,
        ${sql.lit(m.images !== false)})`,
  );
  const none = sql`(-1, '', '', false, 0::bigint, false)`;
  return sql`(values ${sql.join(rows.length > 0 ? rows : [none])}) as m(ord, provider, pattern, allowance, cost, images)`;
}

/**
 * A turn's start in one statement (one round trip, one commit, atomic without a transaction): the
 * reads its decision needs, the decision, billing's reservation and the turn's rows. Read first, in
 * the statement's snapshot: the conversation (`target`), an earlier message with this
 * clientMessageId, the keys (the keys feature's part), the model's catalogue entry. The first check
 * that fails (StartRefusal's order) is answered and nothing is reserved or stored. Else billing's part
 * reserves (a refusal of its own fails the statement whole) and the rows are written: the user
 * message, its images, the reply placeholder ('streaming'), the conversation (created, or its
 * counters moved, which also numbers the two messages; a conversation deleted meanwhile leaves them
 * without a number and the statement fails whole). The answer carries the keys (still sealed) and,
 * for an existing conversation, the history that fits the budget. Another reply of the user left
 * 'streaming' by a crashed instance is not touched here: the sweeper closes it (DESIGN §12).
 */
export async function startTurn(db: Db | Trx, t: TurnStart, parts: StartingParts): Promise<StartRow> {
  const { now, userId } = t;
  const existing = t.target !== undefined;
  const target = existing
    ? sql`select id, provider, model, persona_id from conversations where id = ${t.target} and user_id = ${userId}`
    : sql`select null::uuid as id, null::text as provider, null::text as model, null::text as persona_id where false`;
  const chosen = existing
    ? sql`select provider, model, coalesce(${t.personaId ?? null}::text, persona_id) as persona_id from target`
    : sql`select provider, coalesce(default_model, '') as model, ${t.personaId ?? null}::text as persona_id from pkey`;
  const conversation = existing
    ? sql`update conversations set message_count = message_count + 2, last_message_at = ${now}, updated_at = ${now},
        persona_id = coalesce(${t.personaId ?? null}::text, persona_id)
        where id = ${t.target} and user_id = ${userId} and exists (select 1 from charge) returning message_count`
    : sql`insert into conversations (id, user_id, title, provider, model, persona_id, message_count, last_message_at, created_at, updated_at)
        select ${t.conversationId}::uuid, ${userId}, ${t.title}, provider, model, persona_id, 2, ${now}, ${now}, ${now}
        from chosen where exists (select 1 from charge) returning message_count`;
  const images =
    t.attachments.length === 0
      ? sql``
      : sql`, images as (insert into attachments (id, message_id, user_id, position, format, byte_size, data, created_at)
          select * from (values ${sql.join(
            t.attachments.map(
              (a, i) => sql`(${a.id}::uuid, ${t.userMessage.id}::uuid, ${userId}::text, ${i}::int, ${a.format}::text, ${a.data.length}::int, ${a.data}::bytea,
                ${now}::timestamptz)`,
            ),
          )}) v where exists (select 1 from charge))`;
  const history = existing
    ? historyQuery(sql`(select id from target)`, t.historyBudget)
    : sql`select null::text as role, null::text as content, 0 as images, null::jsonb as parts, 0 as seq where false`;
  const u = t.userMessage;
  const known = t.key?.sealed;
  const { rows } = await sql<StartRow>`with target as (${target}),
      prior as (select 1 from messages where user_id = ${userId} and client_message_id = ${u.clientMessageId}::uuid),
      keys as (${parts.keys(existing ? sql<string>`(select provider from target)` : null)}),
      pkey as (select * from keys where kind = 'provider'),
      mkey as (select * from keys where kind = 'market'),
      chosen as (${chosen}),
      entry as (
        select m.* from ${t.catalogue}
        where m.provider = (select provider from chosen) and (select model from chosen) like m.pattern escape '\\' order by m.ord limit 1),
      refusal as (select case
        when ${existing} and not exists (select 1 from target) then 'CONVERSATION_NOT_FOUND'
        when exists (select 1 from prior) then 'CLIENT_MESSAGE_ID_SEEN'
        when not exists (select 1 from pkey) then 'PROVIDER_KEY_NOT_CONFIGURED'
        when not coalesce((select key_id = ${known?.key_id ?? null}::text and nonce = ${known?.nonce ?? null}::bytea
          and ciphertext = ${known?.ciphertext ?? null}::bytea and tag = ${known?.tag ?? null}::bytea from pkey), false) then 'KEY_CHANGED'
        when not ${t.key?.opens ?? false}::boolean then 'PROVIDER_KEY_DECRYPTION_FAILED'
        when ${t.attachments.length}::int > 0 and (select not images from entry) then 'IMAGES_NOT_SUPPORTED'
        when not ${t.leaseHeld}::boolean then 'STREAM_IN_PROGRESS'
        when not exists (select 1 from entry) then 'MODEL_NOT_AVAILABLE'
        end as code),
      ${TERMS.ref} as (select allowance, cost from entry where (select code from refusal) is null),
      charge as materialized (${parts.reservation}),
      conversation as (${conversation})${images},
      turn as (insert into messages (id, conversation_id, user_id, seq, role, content, status, client_message_id, billing_source, billing_credits, created_at)
        select * from (values
          (${u.id}::uuid, ${t.conversationId}::uuid, ${userId}::text, (select message_count - 1 from conversation)::int, 'user'::text, ${u.content}::text,
           'complete'::text, ${u.clientMessageId}::uuid, null::text, null::bigint, ${now}::timestamptz),
          (${t.replyId}::uuid, ${t.conversationId}::uuid, ${userId}::text, (select message_count from conversation)::int, 'assistant', '', 'streaming', null,
           (select source from charge), (select credits from charge), ${now})) v
        where exists (select 1 from charge)),
      history as (${history})
    select (select code from refusal) as refusal, (select source from charge) as source, (select credits from charge) as credits,
      (select provider from chosen) as provider, (select model from chosen) as model, (select persona_id from chosen) as persona_id,
      (select key_id from pkey) as p_key_id, (select nonce from pkey) as p_nonce, (select ciphertext from pkey) as p_ciphertext,
      (select tag from pkey) as p_tag, (select default_model from pkey) as p_default_model,
      (select provider from mkey) as m_provider, (select key_id from mkey) as m_key_id, (select nonce from mkey) as m_nonce,
      (select ciphertext from mkey) as m_ciphertext, (select tag from mkey) as m_tag,
      (select coalesce(jsonb_agg(jsonb_build_object('role', role, 'content', content, 'images', images, 'parts', parts) order by seq), '[]'::jsonb)
        from history where (select code from refusal) is null) as history`.execute(db);
  const row = rows[0];
  if (!row) throw new Error('the turn statement returned no row');
  return row;
}

/** A rolled-back transaction's answer: the start statement refused the turn. */
class Refused extends Error {
  readonly row: StartRow;
  constructor(row: StartRow) {
    super('the turn was refused');
    this.row = row;
  }
}

/**
 * A turn that takes the place of the conversation's last (`replaced`, regenerate or edit): the last
 * turn dropped, then the start statement, in one transaction; a refusal rolls the drop back.
 */
export async function replaceAndStartTurn(
  db: Db,
  replaced: MessageRow,
  titles: { replaced: string; next: string },
  t: TurnStart,
  parts: StartingParts,
): Promise<StartRow> {
  try {
    return await db.transaction().execute(async (trx) => {
      await dropLastTurn(trx, t.conversationId, replaced, titles);
      const row = await startTurn(trx, t, parts);
      if (row.refusal !== null) throw new Refused(row);
      return row;
    });
  } catch (err) {
    if (err instanceof Refused) return err.row;
    throw err;
  }
}

export interface TurnEnd {
  readonly replyId: string;
  readonly userId: string;
  readonly provider: string;
  readonly model: string;
  readonly now: Date;
  readonly content: string;
  /** The reply's parts as JSON text (parts.ts), null for a text-only reply. */
  readonly parts: string | null;
  readonly status: 'complete' | 'interrupted' | 'failed';
  readonly finishReason: string | null;
  /** DESIGN §13: what the provider counted, priced. */
  readonly receipt: Receipt;
  readonly error: { code: string; retryable: boolean } | undefined;
  /** DESIGN §12: the id of the stream's terminal frame. */
  readonly lastFrameId: number;
}

/** The CTEs of a turn's closing statement that other features' parts read. */
const CLOSING: ClosingCtes = { settlement: cte('settlement'), ended: cte('ended') };

/** The statement parts other features add to a turn's closing statement. */
interface ClosingParts {
  /** Billing's part: a row `(source, credits)` when it charged the turn. */
  readonly settlement: RawBuilder<ChargeRow>;
  /** Usage's part: adds the turn to the daily usage; reads the statement's `ended` and `settlement`. */
  readonly usage: UsagePart;
}

/**
 * Stores the reply as it ended with its receipt and touches its conversation, in one statement with
 * the `settlement` and `usage` parts; returns the settlement's row. `ended` has a row only when this
 * statement is the one that ends the reply (it was 'streaming' in the statement's snapshot), so a
 * retry after a lost commit acknowledgement never counts the usage twice.
 */
export async function finishTurn(db: Db, e: TurnEnd, parts: ClosingParts): Promise<ChargeRow | undefined> {
  const r = e.receipt;
  const { settlement, ended } = CLOSING;
  const { rows } = await sql<ChargeRow>`with ${settlement.ref} as (${parts.settlement}),
    ${ended.ref} as (select 1 from messages where id = ${e.replyId} and status = 'streaming'),
    reply as (
      update messages set content = ${e.content}, parts = ${e.parts}::jsonb, status = ${e.status}, finish_reason = ${e.finishReason},
        input_tokens = ${r.input}::int, output_tokens = ${r.output}::int, cached_input_tokens = ${r.cachedInput}::int,
        reasoning_tokens = ${r.reasoning}::int, cost_micros = ${r.costMicros}::bigint,
        error_code = ${e.error?.code ?? null}, error_retryable = ${e.error?.retryable ?? null}, completed_at = ${e.now},
        last_frame_id = ${e.lastFrameId}::int
      where id = ${e.replyId}
      returning conversation_id),
    conversation as (
      update conversations set updated_at = ${e.now}, last_message_at = ${e.now} where id in (select conversation_id from reply)),
    search as (${turnWords(sql`${e.content}`, e.replyId, ended)}),
    usage as (${parts.usage(CLOSING)})
    select source, credits from ${settlement.ref}`.execute(db);
  return rows[0];
}

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

/**
 * A crashed turn's charge with the turn counted in the user's daily usage and its words indexed, in
 * one statement; `ended` is the settlement's row, so both happen only in the statement that charged it.
 */
export async function chargeCrashedTurn(db: Db, replyId: string, parts: ClosingParts): Promise<ChargeRow | undefined> {
  const { settlement, ended } = CLOSING;
  const { rows } = await sql<ChargeRow>`with ${settlement.ref} as (${parts.settlement}),
    ${ended.ref} as (select 1 from ${settlement.ref}),
    search as (${turnWords(sql`r.content`, replyId, ended)}),
    usage as (${parts.usage(CLOSING)})
    select source, credits from ${settlement.ref}`.execute(db);
  return rows[0];
}
