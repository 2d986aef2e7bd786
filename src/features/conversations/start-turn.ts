import { findModel, PROVIDERS, type Provider } from '../../catalogue.ts';
import type { Deps } from '../../deps.ts';
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, pgErrorCode } from '../../db/create-db.ts';
import { AppError } from '../../http/errors.ts';
import type { ChatMessage } from '../../providers/llm/index.ts';
import type { TurnCharge, TurnRequest } from '../billing/turn-billing.ts';
import { providerKeyFor, usableActiveKey, type UsableProviderKey } from '../advisor-keys/service.ts';
import { buildMessages, defaultTitle, systemPrompt } from './context.ts';
import { decodeImages } from './images.ts';
import * as repo from './repo.ts';
import type { StreamMessageInput } from './schemas.ts';

const NOT_NULL_VIOLATION = '23502';

/** A crashed instance's lease frees itself within this; a live stream renews it every third of it. */
export const LEASE_TTL_MS = 30_000;

export interface TurnIds {
  readonly conversationId: string;
  readonly userMessageId: string;
  readonly assistantMessageId: string;
  readonly provider: Provider;
  readonly model: string;
  readonly billing: { readonly source: string; readonly credits: number };
}

/** A turn to stream from the provider; the caller owns the lease and must settle the charge. */
export interface LiveTurn extends TurnIds {
  readonly kind: 'live';
  readonly userId: string;
  readonly leaseToken: string;
  readonly charge: TurnCharge;
  /**
   * What goes to the provider, taken once by the relay: the key, history and images are not held
   * for the whole stream.
   */
  upstream: { readonly apiKey: string; readonly system: string | undefined; readonly messages: ChatMessage[] } | undefined;
}

/** A finished turn to play back from storage (idempotent retry). */
export interface ReplayTurn extends TurnIds {
  readonly kind: 'replay';
  readonly reply: repo.MessageRow;
}

function settledValue<T>(r: PromiseSettledResult<T>): T {
  if (r.status === 'rejected') throw r.reason;
  return r.value;
}

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `${path}: ${message}`, { details: [{ path, message }] });
}

export function asProvider(name: string): Provider {
  const found = PROVIDERS.find((p) => p === name);
  if (!found) throw new Error(`conversation holds an unknown provider "${name}"`);
  return found;
}

function replayOf(prior: repo.PriorTurn, reply: repo.MessageRow): ReplayTurn {
  return {
    kind: 'replay',
    conversationId: prior.user.conversation_id,
    userMessageId: prior.user.id,
    assistantMessageId: reply.id,
    provider: asProvider(prior.provider),
    model: prior.model,
    billing: { source: reply.billing_source ?? 'free', credits: reply.billing_credits ?? 0 },
    reply,
  };
}

type LeaseOutcome = PromiseSettledResult<string | null>;

/**
 * DESIGN §7 idempotency: the same id with other text, or sent to another conversation, is a reuse;
 * a reply still streaming is a 409 unless its stream is dead (no lease: its instance crashed), in
 * which case it is closed as interrupted and replayed like any finished reply. `lease` is the
 * user's lease as the caller already asked for it (the caller gives it back); without it, the lease
 * is taken here when needed and given back.
 */
async function priorTurn(
  deps: Deps,
  userId: string,
  target: string | null,
  body: StreamMessageInput,
  prior: repo.PriorTurn | undefined,
  lease?: LeaseOutcome,
): Promise<ReplayTurn | undefined> {
  if (!prior) return undefined;
  const sameTarget = target === null ? prior.user.seq === 1 : prior.user.conversation_id === target;
  if (prior.user.content !== body.text || !sameTarget) {
    throw new AppError('CLIENT_MESSAGE_ID_REUSED', 'this clientMessageId was already used for another message');
  }
  if (prior.reply !== undefined && prior.reply.status !== 'streaming') return replayOf(prior, prior.reply);
  const token = lease ? settledValue(lease) : await deps.leases.acquire(userId, LEASE_TTL_MS);
  if (token === null) throw new AppError('STREAM_IN_PROGRESS', 'the reply to this message is still streaming');
  try {
    await repo.closeAbandonedReplies(deps.db, userId, deps.clock.now());
  } finally {
    if (!lease) await deps.leases.release(userId, token);
  }
  const again = await repo.findTurnByClientId(deps.db, userId, body.clientMessageId);
  if (again?.reply === undefined) throw new Error('a stored turn lost its reply row');
  return replayOf(again, again.reply);
}

/** Gives back a lease this request will not stream under; a failure is logged, the answer still goes out. */
async function releaseLease(deps: Deps, userId: string, leaseToken: string): Promise<void> {
  await deps.leases.release(userId, leaseToken).catch((err: unknown) => deps.logger.error({ err }, 'releasing a stream lease failed'));
}

interface CheckedTurn {
  readonly kind: 'checked';
  readonly conversation: repo.ConversationRow | undefined;
  readonly key: UsableProviderKey;
  readonly provider: Provider;
  readonly model: string;
  readonly leaseToken: string;
  /** The conversation's earlier turns that fit the context budget (none for a new conversation). */
  readonly history: repo.HistoryRow[];
}

/**
 * Every check before a stream, cheapest and most client-fixable first; a refusal stores nothing,
 * holds no lease, reserves nothing and calls no provider (DESIGN §3). Draining, the body cap and the
 * schema run before this (route hooks and validation); `admission` is the rate-limit verdict the
 * route asked for before the body was read, taken here first, alongside the reads.
 */
export async function startTurn(
  deps: Deps,
  userId: string,
  target: string | null,
  body: StreamMessageInput,
  admission: Promise<void> = Promise.resolve(),
): Promise<LiveTurn | ReplayTurn> {
  if (body.text.trim().length === 0) throw invalid('/text', 'must contain a non-whitespace character');
  if (body.personaId !== undefined && !deps.config.catalogue.personas.some((p) => p.personaId === body.personaId)) {
    throw invalid('/personaId', 'is not a known persona');
  }
  const images = decodeImages(body.attachments ?? [], deps.config.maxImageBytes);
  // Independent reads and the user's stream lease at once (one round trip); their outcomes are then
  // taken in the documented order, the lease's last. A request refused or replayed before that gives
  // the lease back before it answers.
  // A new conversation reads the earlier message with this id and the active key in one query.
  const newTurn = target === null ? repo.findUserMessageAndActiveKey(deps.db, userId, body.clientMessageId) : undefined;
  const [admitted, found, prior, activeKey, lease] = await Promise.allSettled([
    admission,
    target === null ? undefined : repo.findConversation(deps.db, userId, target),
    newTurn ? newTurn.then((r) => (r.message ? repo.priorTurnOf(deps.db, r.message) : undefined)) : repo.findTurnByClientId(deps.db, userId, body.clientMessageId),
    newTurn?.then((r) => usableActiveKey(deps, r.key)),
    deps.leases.acquire(userId, LEASE_TTL_MS),
  ]);
  const held = lease.status === 'fulfilled' ? lease.value : null;
  let checked: CheckedTurn | ReplayTurn;
  try {
    settledValue(admitted);
    checked = await checkTurn(deps, userId, target, body, images.length, found, prior, activeKey, lease);
  } catch (err) {
    if (held !== null) await releaseLease(deps, userId, held);
    throw err;
  }
  if (checked.kind === 'replay') {
    if (held !== null) await releaseLease(deps, userId, held);
    return checked;
  }
  const { conversation, key, provider, model, leaseToken, history } = checked;
  const conversationId = conversation?.id ?? deps.ids.uuid();
  const userMessageId = deps.ids.uuid();
  const assistantMessageId = deps.ids.uuid();
  const personaId = body.personaId ?? conversation?.persona_id ?? null;
  let charge: TurnCharge;
  let upstream: NonNullable<LiveTurn['upstream']>;
  try {
    upstream = { apiKey: key.apiKey, system: systemPrompt(deps.config.catalogue, personaId), messages: buildMessages(history, body.text, images) };
    charge = await reserveAndStore(deps, { turnId: assistantMessageId, userId, provider, model, images: images.length }, {
      now: deps.clock.now(),
      userId,
      conversationId,
      newConversation: conversation ? undefined : { id: conversationId, title: defaultTitle(body.text), provider, model, persona_id: personaId },
      personaId: body.personaId,
      userMessage: { id: userMessageId, content: body.text, clientMessageId: body.clientMessageId },
      replyId: assistantMessageId,
      attachments: images.map((i) => ({ id: deps.ids.uuid(), format: i.format, data: i.data })),
    });
  } catch (err) {
    await releaseLease(deps, userId, leaseToken);
    const code = pgErrorCode(err);
    // Lost a race with a concurrent duplicate (the unique index decided) or with a delete.
    if (code === UNIQUE_VIOLATION) {
      const replayed = await priorTurn(deps, userId, target, body, await repo.findTurnByClientId(deps.db, userId, body.clientMessageId));
      if (replayed) return replayed;
      throw new AppError('STREAM_IN_PROGRESS', 'another reply is streaming for this conversation');
    }
    if ((code === NOT_NULL_VIOLATION || code === FOREIGN_KEY_VIOLATION) && conversation) {
      throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
    }
    throw err;
  }
  return {
    kind: 'live',
    userId,
    conversationId,
    userMessageId,
    assistantMessageId,
    provider,
    model,
    billing: { source: charge.source, credits: charge.credits },
    leaseToken,
    charge,
    upstream,
  };
}

/**
 * Reserves the turn and stores its start: in one statement when billing offers it (one round trip,
 * one commit; both stored or neither), else the reservation first and the rows after, the
 * reservation given back if storing fails. A refusal or failure stores and reserves nothing.
 */
async function reserveAndStore(deps: Deps, req: TurnRequest, rows: repo.TurnRows): Promise<TurnCharge> {
  const billing = deps.billing;
  if (billing.reserveWith) return billing.reserveWith(req, (db, reservation) => repo.startReservedTurn(db, rows, reservation));
  const charge = await billing.reserve(req);
  try {
    await repo.startTurn(deps.db, rows, charge);
  } catch (err) {
    await billing.settle(charge, false).catch((e: unknown) => deps.logger.error({ err: e, turnId: charge.turnId }, 'returning a refused turn failed'));
    throw err;
  }
  return charge;
}

/** The checks after the reads, in the documented order, ending with the lease: a turn to reserve, a replay, or a refusal. */
async function checkTurn(
  deps: Deps,
  userId: string,
  target: string | null,
  body: StreamMessageInput,
  imageCount: number,
  found: PromiseSettledResult<repo.ConversationRow | undefined>,
  prior: PromiseSettledResult<repo.PriorTurn | undefined>,
  activeKey: PromiseSettledResult<UsableProviderKey | undefined>,
  lease: LeaseOutcome,
): Promise<CheckedTurn | ReplayTurn> {
  const conversation = settledValue(found);
  if (target !== null && conversation === undefined) throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');

  const replay = await priorTurn(deps, userId, target, body, settledValue(prior), lease);
  if (replay) return replay;

  // An existing conversation keeps its provider and model; only the key is looked up, alongside the
  // earlier turns for the context. Those are read under the user's lease (held since the reads), so a
  // reply that has just ended is in them.
  let key: UsableProviderKey | undefined;
  let earlier: PromiseSettledResult<repo.HistoryRow[]> = { status: 'fulfilled', value: [] };
  if (conversation) {
    const held = lease.status === 'fulfilled' && lease.value !== null;
    const [keyRead, historyRead] = await Promise.allSettled([
      providerKeyFor(deps, userId, asProvider(conversation.provider)),
      held ? repo.historyWithin(deps.db, conversation.id, deps.config.contextBudgetChars) : [],
    ]);
    key = settledValue(keyRead);
    earlier = historyRead;
  } else {
    key = settledValue(activeKey);
  }
  if (key === undefined) throw new Error('no key for a new conversation');
  const provider = conversation ? asProvider(conversation.provider) : key.provider;
  const model = conversation?.model ?? key.model;
  if (imageCount > 0 && findModel(deps.config.catalogue, provider, model)?.images === false) {
    throw new AppError('IMAGES_NOT_SUPPORTED', `${provider} model ${model} does not take images`);
  }

  // Draining began while this request was being checked (the route gate saw it too late).
  if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly');
  const leaseToken = settledValue(lease);
  if (leaseToken === null) throw new AppError('STREAM_IN_PROGRESS', 'another reply is streaming for this user');
  return { kind: 'checked', conversation, key, provider, model, leaseToken, history: settledValue(earlier) };
}
