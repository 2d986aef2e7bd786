import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { normaliseTitle } from './context.ts';
import { invalidCursor, openCursor, sealCursor } from './cursor.ts';
import { CONTENT_TYPE } from './images.ts';
import { storedGrounding, storedReceipt } from './frames.ts';
import { usageDto } from '../usage/receipt.ts';
import { turnPayments, type TurnPayment } from '../billing/turn-billing.ts';
import * as repo from './repo.ts';
import { apiParts } from './parts.ts';
import { searchTerms } from './search.ts';
import type { ConversationListItemDto, ConversationWithMessagesDto, MessageDto } from './schemas.ts';
import { asProvider } from './input.ts';

type ReadDeps = Pick<Deps, 'db' | 'vault'>;

const DEFAULT_PAGE = 25;
const TITLE_MAX = 200;
const EXACT_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function notFound(): AppError {
  return new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
}

function toListItem(row: repo.ConversationRow): ConversationListItemDto {
  return {
    id: row.id,
    title: row.title,
    provider: asProvider(row.provider),
    model: row.model,
    personaId: row.persona_id,
    messageCount: row.message_count,
    lastMessageAt: row.last_message_at.toISOString(),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function toMessage(row: repo.MessageRow, attachments: repo.AttachmentMeta[], payment: TurnPayment | undefined): MessageDto {
  const grounding = storedGrounding(row);
  return {
    id: row.id,
    role: row.role,
    text: row.content,
    parts: apiParts(row.parts, row.content),
    status: row.status,
    clientMessageId: row.client_message_id,
    finishReason: row.finish_reason,
    usage: row.role === 'assistant' ? usageDto(storedReceipt(row)) : null,
    error: row.error_code === null ? null : { code: row.error_code, retryable: row.error_retryable ?? true },
    attachments: attachments.map((a) => ({ id: a.id, format: a.format, byteSize: a.byte_size, url: `/api/advisor/attachments/${a.id}` })),
    ...(grounding ? { grounding } : {}),
    billing: row.role === 'assistant' ? (payment ?? null) : null,
    createdAt: row.created_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
  };
}

const NOTHING_FOUND = '{"items":[],"nextCursor":null}';

/**
 * Spec 4.5: newest first by (updatedAt, id), so rows sharing an instant are each listed once; with
 * `q`, the conversations whose search document holds its words (search.ts), in the same order.
 */
export async function listConversations(deps: ReadDeps, userId: string, cursor: string | undefined, limit = DEFAULT_PAGE, q?: string): Promise<string> {
  let after: { updatedAt: string; id: string } | undefined;
  if (cursor !== undefined) {
    const [updatedAt, id] = openCursor(deps.vault, userId, 'conversations', cursor);
    if (typeof updatedAt !== 'string' || !EXACT_INSTANT.test(updatedAt) || typeof id !== 'string' || !UUID.test(id)) throw invalidCursor();
    after = { updatedAt, id };
  }
  const terms = q === undefined ? undefined : searchTerms(q);
  if (q !== undefined && terms === undefined) return NOTHING_FOUND;
  const page = await repo.listConversationsPage(deps.db, userId, limit, after, terms);
  const nextCursor = page.next ? sealCursor(deps.vault, userId, 'conversations', [page.next.updatedAt, page.next.id]) : null;
  // A ConversationList, already serialized: the items are the database's JSON; a cursor is base64url and a dot.
  return `{"items":${page.itemsJson},"nextCursor":${nextCursor === null ? 'null' : `"${nextCursor}"`}}`;
}

/** The conversation and one page of its messages: the latest first, then older pages through the cursor. */
export async function getConversation(
  deps: ReadDeps,
  userId: string,
  id: string,
  cursor: string | undefined,
  limit = DEFAULT_PAGE,
): Promise<ConversationWithMessagesDto> {
  let beforeSeq: number | undefined;
  if (cursor !== undefined) {
    const [conversationId, seq] = openCursor(deps.vault, userId, 'messages', cursor);
    // A cursor of another conversation is not one produced for this list.
    if (conversationId !== id || typeof seq !== 'number' || !Number.isSafeInteger(seq)) throw invalidCursor();
    beforeSeq = seq;
  }
  const conversation = await repo.findConversation(deps.db, userId, id);
  if (!conversation) throw notFound();
  const rows = await repo.listMessages(deps.db, id, limit + 1, beforeSeq);
  const page = rows.slice(0, limit).reverse();
  const first = page[0];
  const [attachments, payments] = await Promise.all([
    repo.attachmentsOf(
      deps.db,
      page.filter((m) => m.role === 'user').map((m) => m.id),
    ),
    turnPayments(
      deps,
      page.filter((m) => m.role === 'assistant').map((m) => m.id),
    ),
  ]);
  const byMessage = new Map<string, repo.AttachmentMeta[]>();
  for (const a of attachments) byMessage.set(a.message_id, [...(byMessage.get(a.message_id) ?? []), a]);
  return {
    ...toListItem(conversation),
    messages: page.map((m) => toMessage(m, byMessage.get(m.id) ?? [], payments.get(m.id))),
    nextCursor: rows.length > limit && first ? sealCursor(deps.vault, userId, 'messages', [id, first.seq]) : null,
  };
}

export async function renameConversation(
  deps: Pick<Deps, 'db' | 'clock' | 'logger'>,
  userId: string,
  id: string,
  title: string,
): Promise<ConversationListItemDto> {
  const normalised = normaliseTitle(title);
  if (normalised.length < 1 || [...normalised].length > TITLE_MAX) {
    throw new AppError('VALIDATION_ERROR', `/title: must be 1 to ${TITLE_MAX} characters after collapsing whitespace`, {
      details: [{ path: '/title', message: `must be 1 to ${TITLE_MAX} characters after collapsing whitespace` }],
    });
  }
  const row = await repo.renameConversation(deps.db, userId, id, normalised, deps.clock.now());
  if (!row) throw notFound();
  // Derived data: a failure is logged, the rename stands.
  await repo.indexTitle(deps.db, id).catch((err: unknown) => deps.logger.warn({ err, conversationId: id }, 'the new title could not be indexed for search'));
  return toListItem(row);
}

/** Messages and images go with it. A reply still streaming finishes, but is stored nowhere. */
export async function deleteConversation(deps: Pick<Deps, 'db'>, userId: string, id: string): Promise<void> {
  if (!(await repo.deleteConversation(deps.db, userId, id))) throw notFound();
}

export async function attachment(deps: Pick<Deps, 'db'>, userId: string, id: string): Promise<{ contentType: string; data: Buffer }> {
  const row = await repo.findAttachment(deps.db, userId, id);
  if (!row) throw new AppError('ATTACHMENT_NOT_FOUND', 'attachment not found');
  const data = Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength);
  return { contentType: CONTENT_TYPE[row.format], data };
}
