// A turn's two statements, built here from each feature's typed part (DESIGN §7, §8, §13): the start
// (reads, decision, billing's reservation, the turn's rows: one round trip) and the closing (the reply
// stored, billing's settlement, usage's count, the search words: one round trip). A part that reads
// another's CTE takes it as a typed `Cte`, so a rename is a type error.
import { sql, type RawBuilder } from 'kysely';
import { cte } from '../../db/cte.ts';
import type { Db, Trx } from '../../db/types.ts';
import { globToLike } from '../../model-glob.ts';
import type { ChargeRow, ClosingStatement, SettlementPart } from '../billing/turn-billing.ts';
import type { Receipt } from '../usage/receipt.ts';
import { countTurnPart, type ClosingCtes, type UsagePart } from '../usage/service.ts';
import type { Grounding } from './grounding.ts';
import { turnWords, type MessageRow } from './repo.ts';

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
  /**
   * The admission's answer, asked once the statement is built and before it is sent (nothing is stored
   * before it is in): whether the request holds its user's stream lease, and the instant it came in.
   * The turn's rows are stamped with that instant, not the request's arrival: the lease came back from
   * the user's previous turn only after that turn's reply was stored, so a user's replies never overlap
   * in time (DESIGN §4), however long the answer took (a stalled lease store).
   */
  readonly admission: () => Promise<Admission>;
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

/** The admission's answer to a turn's start (`TurnStart.admission`). */
interface Admission {
  readonly leaseHeld: boolean;
  readonly at: Date;
}

/** The start statement's parameters that stand for the admission's answer until it is in (`TurnStart.admission`). */
const LEASE_HELD: unknown = Object.freeze({ leaseHeld: 'pending' });
const ADMITTED_AT: unknown = Object.freeze({ admittedAt: 'pending' });

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
  const { userId } = t;
  const now = ADMITTED_AT;
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
  const statement = sql<StartRow>`with target as (${target}),
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
        when not ${LEASE_HELD}::boolean then 'STREAM_IN_PROGRESS'
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
        from history where (select code from refusal) is null) as history`.compile(db);
  // The admission's answer goes in last (LEASE_HELD, ADMITTED_AT): the statement is built while it is on its way.
  const admission = await t.admission();
  const answer = (p: unknown): unknown => (p === LEASE_HELD ? admission.leaseHeld : p === ADMITTED_AT ? admission.at : p);
  const { rows } = await db.executeQuery<StartRow>({ ...statement, parameters: statement.parameters.map(answer) });
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
 * A turn that takes the place of the conversation's last (`replaced`, regenerate or edit): billing's
 * `giveBack` of a cut turn's charge (DESIGN §7), the last turn dropped, then the start statement, in one
 * transaction; a refusal rolls the give-back and the drop back.
 */
export async function replaceAndStartTurn(
  db: Db,
  replaced: MessageRow,
  titles: { replaced: string; next: string },
  t: TurnStart,
  parts: StartingParts & { readonly giveBack?: ((trx: Trx) => Promise<unknown>) | undefined },
): Promise<StartRow> {
  try {
    return await db.transaction().execute(async (trx) => {
      await parts.giveBack?.(trx);
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
  /** DESIGN §18: the check of the reply's figures. */
  readonly grounding: Grounding;
}

/** The CTEs of a turn's closing statement that other features' parts read. */
const CLOSING: ClosingCtes = { settlement: cte('settlement'), ended: cte('ended') };

/**
 * A turn's closing statement, its hole billing's settlement (`ClosingStatement`): the reply stored as
 * it ended with its receipt, its conversation touched, its words indexed and the turn counted in the
 * daily usage (usage's part); answers the settlement's row. `ended` has a row only when this statement
 * is the one that ends the reply (it was 'streaming' in the statement's snapshot), so a retry after a
 * lost commit acknowledgement never counts the usage twice.
 */
export function closingStatement(e: TurnEnd): ClosingStatement {
  const r = e.receipt;
  const usage = countTurnPart({ userId: e.userId, provider: e.provider, model: e.model, receipt: r, endedAt: e.now });
  const { settlement, ended } = CLOSING;
  return (part: SettlementPart) => sql<ChargeRow>`with ${settlement.ref} as (${part}),
    ${ended.ref} as (select 1 from messages where id = ${e.replyId} and status = 'streaming'),
    reply as (
      update messages set content = ${e.content}, parts = ${e.parts}::jsonb, status = ${e.status}, finish_reason = ${e.finishReason},
        input_tokens = ${r.input}::int, output_tokens = ${r.output}::int, cached_input_tokens = ${r.cachedInput}::int,
        reasoning_tokens = ${r.reasoning}::int, cost_micros = ${r.costMicros}::bigint,
        error_code = ${e.error?.code ?? null}, error_retryable = ${e.error?.retryable ?? null}, completed_at = ${e.now},
        last_frame_id = ${e.lastFrameId}::int, grounding = ${JSON.stringify(e.grounding)}::jsonb
      where id = ${e.replyId}
      returning conversation_id),
    conversation as (
      update conversations set updated_at = ${e.now}, last_message_at = ${e.now} where id in (select conversation_id from reply)),
    search as (${turnWords(sql`${e.content}`, e.replyId, ended)}),
    usage as (${usage(CLOSING)})
    select source, credits from ${settlement.ref}`;
}

/**
 * A crashed turn's closing statement (its reply closed already by closeCrashedReply): billing's
 * charge with the turn counted in the user's daily usage and its words indexed; `ended` is the
 * settlement's row, so both happen only in the statement that charged it.
 */
export function crashedClosingStatement(replyId: string, usage: UsagePart): ClosingStatement {
  const { settlement, ended } = CLOSING;
  return (part) => sql<ChargeRow>`with ${settlement.ref} as (${part}),
    ${ended.ref} as (select 1 from ${settlement.ref}),
    search as (${turnWords(sql`r.content`, replyId, ended)}),
    usage as (${usage(CLOSING)})
    select source, credits from ${settlement.ref}`;
}
