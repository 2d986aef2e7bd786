import { sql, type RawBuilder, type Selectable } from 'kysely';
import type { AttachmentsTable, ConversationsTable, Db, MessagesTable, Trx } from '../../db/types.ts';
import type { ChargeRow } from '../billing/turn-billing.ts';
import type { Receipt } from '../usage/receipt.ts';

export type ConversationRow = Selectable<ConversationsTable>;
export type MessageRow = Selectable<MessagesTable>;
export type AttachmentRow = Selectable<AttachmentsTable>;
export type AttachmentMeta = Pick<AttachmentRow, 'id' | 'message_id' | 'format' | 'byte_size'>;

/** updated_at with the database's full (microsecond) precision, so a cursor names a row exactly. */
const EXACT_UPDATED_AT = sql<string>`to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A timestamp as the API shows it (ISO 8601, UTC, milliseconds truncated, as Date#toISOString). */
const iso = (column: 'last_message_at' | 'created_at' | 'updated_at'): RawBuilder<string> =>
  sql<string>`to_char(${sql.ref(column)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** One page of the list: its items as ConversationListItem JSON, and where the next page starts. */
export interface ConversationPage {
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
): Promise<ConversationPage> {
  const result = await conversationPageQuery(userId, limit, after).execute(db);
  const row = result.rows[0];
  if (!row) throw new Error('the list query returned no row');
  const next = row.more && row.last_exact !== null && row.last_id !== null ? { updatedAt: row.last_exact, id: row.last_id } : undefined;
  return { itemsJson: row.items, next };
}

/**
 * The statement behind listConversationsPage. Exported for bench/scenarios/list.ts: its baseline is this
 * very statement sent straight to PostgreSQL, and a copy there would stop measuring the service's.
 */
export function conversationPageQuery(
  userId: string,
  limit: number,
  after: { updatedAt: string; id: string } | undefined,
): RawBuilder<{ items: string; last_exact: string | null; last_id: string | null; more: boolean }> {
  const afterRow = after ? sql`and (updated_at, id) < (${after.updatedAt}::timestamptz, ${after.id}::uuid)` : sql``;
  return sql<{ items: string; last_exact: string | null; last_id: string | null; more: boolean }>`
    select
      coalesce(json_agg(json_build_object(
        'id', id, 'title', title, 'provider', provider, 'model', model, 'personaId', persona_id,
        'messageCount', message_count, 'lastMessageAt', ${iso('last_message_at')}, 'createdAt', ${iso('created_at')},
        'updatedAt', ${iso('updated_at')}
      ) order by n) filter (where n <= ${limit}), '[]')::text as items,
      max(${EXACT_UPDATED_AT}) filter (where n = ${limit}) as last_exact,
      max(id::text) filter (where n = ${limit}) as last_id,
      count(*) > ${limit} as more
    from (
      select *, row_number() over (order by updated_at desc, id desc) as n
      from conversations
      where user_id = ${userId} ${afterRow}
      order by updated_at desc, id desc
      limit ${limit + 1}
    ) page`;
}

export function findConversation(db: Db | Trx, userId: string, id: string): Promise<ConversationRow | undefined> {
  return db.selectFrom('conversations').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
}

export function renameConversation(db: Db, userId: string, id: string, title: string, now: Date): Promise<ConversationRow | undefined> {
  return db
    .updateTable('conversations')
    .set({ title, updated_at: now })
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .returningAll()
    .executeTakeFirst();
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
  const user = await db
    .selectFrom('messages')
    .selectAll()
    .where('user_id', '=', userId)
    .where('client_message_id', '=', clientMessageId)
    .executeTakeFirst();
  return user ? priorTurnOf(db, user) : undefined;
}

/** The turn a stored user message opened: its reply and its conversation's provider and model. */
async function priorTurnOf(db: Db, user: MessageRow): Promise<PriorTurn> {
  const [reply, conversation] = await Promise.all([
    db.selectFrom('messages').selectAll().where('conversation_id', '=', user.conversation_id).where('seq', '=', user.seq + 1).executeTakeFirst(),
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
 * The latest messages whose text fits in `budget` characters together, oldest first: the budget is
 * filled from the newest message back and the first that does not fit ends it. A reply with tool
 * calls counts its parts' JSON (a call and its result are one message: kept or dropped together).
 * Empty replies carry nothing and are skipped.
 */
export async function historyWithin(db: Db, conversationId: string, budget: number): Promise<HistoryRow[]> {
  const result = await sql<HistoryRow>`
    select role, content, images, parts from (
      select m.role, m.content, m.seq, m.parts,
             (select count(*)::int from attachments a where a.message_id = m.id) as images,
             sum(coalesce(char_length(m.parts::text), char_length(m.content))) over (order by m.seq desc) as running
      from messages m
      where m.conversation_id = ${conversationId} and (m.role = 'user' or m.content <> '' or m.parts is not null)
    ) h
    where running <= ${budget}
    order by seq`.execute(db);
  return result.rows;
}

export interface TurnRows {
  readonly now: Date;
  readonly userId: string;
  /** Present for a new conversation, which this statement creates. */
  readonly newConversation: Omit<ConversationRow, 'user_id' | 'message_count' | 'last_message_at' | 'created_at' | 'updated_at'> | undefined;
  readonly conversationId: string;
  /** An existing conversation's persona switch (undefined keeps it). */
  readonly personaId: string | undefined;
  readonly userMessage: { id: string; content: string; clientMessageId: string };
  readonly replyId: string;
  readonly attachments: readonly { id: string; format: 'png' | 'jpeg' | 'webp'; data: Buffer }[];
}

const STREAMING_LEFT_BEHIND = { status: 'interrupted', error_code: 'SHUTTING_DOWN', error_retryable: true } as const;

/**
 * A turn's start and its billing reservation in one statement (one round trip, one commit, atomic
 * without a transaction): the user message, its images, the reply placeholder ('streaming') and the
 * conversation (created, or its counters moved, which also numbers the two messages; a conversation
 * deleted meanwhile leaves them without a number and the statement fails whole). `reservation`
 * (billing's one-row query, read once) decides how the reply is paid; a refusal fails the statement
 * whole, so nothing of the turn is stored. Another reply of the user left 'streaming' by a crashed
 * instance is not touched here: the sweeper closes it with what its frame log holds (DESIGN §12).
 * Returns the reservation's row.
 */
export async function startReservedTurn(db: Db, t: TurnRows, reservation: RawBuilder<ChargeRow>): Promise<ChargeRow> {
  const { now, userId } = t;
  const conversation = t.newConversation
    ? sql`insert into conversations (id, user_id, title, provider, model, persona_id, message_count, last_message_at, created_at, updated_at)
        values (${t.newConversation.id}, ${userId}, ${t.newConversation.title}, ${t.newConversation.provider}, ${t.newConversation.model},
                ${t.newConversation.persona_id}, 2, ${now}, ${now}, ${now}) returning message_count`
    : sql`update conversations set message_count = message_count + 2, last_message_at = ${now}, updated_at = ${now},
        persona_id = coalesce(${t.personaId ?? null}, persona_id) where id = ${t.conversationId} and user_id = ${userId}
        returning message_count`;
  const images =
    t.attachments.length === 0
      ? sql``
      : sql`, images as (insert into attachments (id, message_id, user_id, position, format, byte_size, data, created_at) values ${sql.join(
          t.attachments.map((a, i) => sql`(${a.id}, ${t.userMessage.id}, ${userId}, ${i}, ${a.format}, ${a.data.length}, ${a.data}, ${now})`),
        )})`;
  const u = t.userMessage;
  const { rows } = await sql<ChargeRow>`with charge as materialized (${reservation}),
      conversation as (${conversation})${images},
      turn as (insert into messages (id, conversation_id, user_id, seq, role, content, status, client_message_id, billing_source, billing_credits, created_at)
        values (${u.id}, ${t.conversationId}, ${userId}, (select message_count - 1 from conversation), 'user', ${u.content}, 'complete',
                ${u.clientMessageId}, null, null, ${now}),
               (${t.replyId}, ${t.conversationId}, ${userId}, (select message_count from conversation), 'assistant', '', 'streaming', null,
                (select source from charge), (select credits from charge), ${now}))
    select source, credits from charge`.execute(db);
  const row = rows[0];
  if (!row) throw new Error('the turn statement returned no reservation');
  return row;
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

/** The statement parts other features add to a turn's closing statement. */
export interface ClosingParts {
  /** Billing's part: a row `(source, credits)` when it charged the turn. */
  readonly settlement: RawBuilder<ChargeRow>;
  /** Usage's part: adds the turn to the daily usage; reads the `ended` and `settlement` CTEs. */
  readonly usage: RawBuilder<never>;
}

/**
 * Stores the reply as it ended with its receipt and touches its conversation, in one statement with
 * the `settlement` and `usage` parts; returns the settlement's row. `ended` has a row only when this
 * statement is the one that ends the reply (it was 'streaming' in the statement's snapshot), so a
 * retry after a lost commit acknowledgement never counts the usage twice.
 */
export async function finishTurn(db: Db, e: TurnEnd, parts: ClosingParts): Promise<ChargeRow | undefined> {
  const r = e.receipt;
  const { rows } = await sql<ChargeRow>`with settlement as (${parts.settlement}),
    ended as (select 1 from messages where id = ${e.replyId} and status = 'streaming'),
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
    usage as (${parts.usage})
    select source, credits from settlement`.execute(db);
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
export interface ClosedCrashedReply {
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
 * A crashed turn's charge with the turn counted in the user's daily usage, in one statement; `ended`
 * is the settlement's row, so the usage is counted only by the statement that charged the turn.
 */
export async function chargeCrashedTurn(db: Db, parts: ClosingParts): Promise<ChargeRow | undefined> {
  const { rows } = await sql<ChargeRow>`with settlement as (${parts.settlement}),
    ended as (select 1 from settlement),
    usage as (${parts.usage})
    select source, credits from settlement`.execute(db);
  return rows[0];
}
