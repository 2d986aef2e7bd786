// An advisor turn, from request to settlement, as named stages run in order by `streamTurn`:
// admission → body and images → reads → decision → reserve and store → relay → outcome → settle and end.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { findModel, PROVIDERS, type PricingConfig, type Provider } from '../../catalogue.ts';
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, isDatabaseUnavailable, pgErrorCode } from '../../db/create-db.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { enforceRateLimit } from '../../http/rate-limit.ts';
import type { RateLimitRule } from '../../platform/rate-limiter.ts';
import {
  ProviderError,
  type ChatEvent,
  type ChatImage,
  type FinishReason,
  type RoundUsage,
  type ToolCallPart,
  type ToolResultPart,
} from '../../providers/llm/index.ts';
import type { UsableMarketDataKey } from '../advisor-keys/market-data-service.ts';
import { keysForTurn, type TurnKeys, type UsableProviderKey } from '../advisor-keys/service.ts';
import { overLimit, Toolbox, type ToolOutcome } from '../advisor-tools/toolbox.ts';
import { reservationState } from '../billing/turn-billing.ts';
import { abandonTurn, settleCrashed } from './crashed-turns.ts';
import { buildMessages, defaultTitle, systemPrompt } from './context.ts';
import { deltaData, doneData, errorData, replayTurn, toolCallData, toolResultData, type StreamErrorCode, type TurnIds } from './frames.ts';
import { resultPart, storable } from './parts.ts';
import { serveStream } from './attach.ts';
import { decodeImages } from './images.ts';
import { LiveTurn, type RoundRequest, type StopCause } from './live-turn.ts';
import { LeaseClaim } from './lease-claim.ts';
import * as repo from './repo.ts';
import type { StreamMessageInput } from './schemas.ts';

/** DESIGN §4: new and existing conversations together. */
const ADVISOR_MESSAGES: RateLimitRule = { name: 'advisor-messages', limit: 30, windowMs: 60_000 };

/**
 * Every refusal of a stream request, stage by stage in the order they are checked (DESIGN §3, §7).
 * A refusal stores, reserves and calls nothing. The route's description is written from this list.
 */
const TURN_CHECKS = {
  admission: ['503 SERVICE_UNAVAILABLE while draining', '429 RATE_LIMITED (30 per rolling 60 s per user, counted before the body is read)'],
  body: [
    '413 PAYLOAD_TOO_LARGE',
    '400 VALIDATION_ERROR (schema, whitespace-only text, unknown personaId)',
    'per image 400 IMAGE_INVALID (base64) / 413 IMAGE_TOO_LARGE / 400 IMAGE_INVALID (bytes not of the declared format)',
  ],
  decision: [
    '404 CONVERSATION_NOT_FOUND',
    'clientMessageId: 409 CLIENT_MESSAGE_ID_REUSED, 409 STREAM_IN_PROGRESS while its reply streams, or a replay of the stored reply',
    'replaces: 400 VALIDATION_ERROR unless it names the conversation’s last user message (never on a new conversation), 409 STREAM_IN_PROGRESS while ' +
      'its reply streams',
    '409 PROVIDER_KEY_NOT_CONFIGURED / PROVIDER_KEY_DECRYPTION_FAILED',
    '400 IMAGES_NOT_SUPPORTED',
    '409 STREAM_IN_PROGRESS (one live stream per user)',
  ],
  reserve: ['billing 402 / 429 TIER_LIMIT_IMAGES'],
} as const;

export const TURN_CHECKS_DOC =
  'Checks, in order (each refusal stores, reserves and calls nothing): ' + `${Object.values(TURN_CHECKS).flat().join('; ')}. Then 200 text/event-stream.`;

/** A stream request body up to this size is read while the rate-limit verdict is on its way. */
const READ_BEFORE_VERDICT_BYTES = 64 * 1024;
const NOT_NULL_VIOLATION = '23502';

/**
 * Stage 1, admission (the route's onRequest hook: after authentication, before the body is read).
 * Every request counts (DESIGN §4). The verdict is left in flight while a small body is read and
 * checked and the turn's first reads run, so the limit costs no round trip of its own; a large body
 * (images) is not read at all for a request the limit refuses.
 */
export function admitTurn(deps: Deps): (req: FastifyRequest, reply: FastifyReply) => Promise<void> {
  return async (req, reply) => {
    if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly');
    const verdict = enforceRateLimit(deps.limiter, ADVISOR_MESSAGES, req.user.id, reply);
    verdict.catch(() => undefined);
    deps.streams.verdicts.set(req, verdict);
    if (!(Number(req.headers['content-length']) <= READ_BEFORE_VERDICT_BYTES)) await verdict;
  };
}

/** The route's error handler: a request the limit refuses is a 429 whatever else is wrong with it. */
export function refuseAfterVerdict(deps: Deps): (err: unknown, req: FastifyRequest) => Promise<never> {
  return async (err, req) => {
    await deps.streams.verdictOf(req);
    throw err;
  };
}

/** The whole turn: its stages in order. `target` is the conversation, or null to start one. */
export async function streamTurn(deps: Deps, req: FastifyRequest, reply: FastifyReply, target: string | null): Promise<void> {
  const userId = req.user.id;
  let claim: LeaseClaim | undefined;
  let started: Started;
  try {
    const input = readInput(deps, req.body as StreamMessageInput);
    claim = new LeaseClaim(deps, userId);
    const reads = await readTurn(deps, userId, target, input, deps.streams.verdictOf(req), claim);
    const plan = await decide(deps, userId, target, input, reads);
    started = plan.kind === 'replay' ? plan : await reserveAndStore(deps, userId, target, input, plan, reply.log);
  } catch (err) {
    // Awaited here, so the refusal is handled before the finally gives the lease back.
    return await refuseAfterVerdict(deps)(err, req);
  } finally {
    // A turn that started holds the lease now (handed over); any other outcome gives it back here.
    await claim?.release();
  }
  // Up to 18 MB of base64 is decoded and stored by now; the stream may last minutes.
  (req as { body: unknown }).body = null;
  if (started.kind === 'replay') return replayTurn(reply, started, started.reply);
  const { live, request } = started;
  // The provider call goes out first, and the start frame is logged while it is on its way: the
  // turn is stored by now (DESIGN §7), and the frame's write is then off the path to the first delta.
  const first = startRound(live, request);
  // The request's own client is the turn's first follower (DESIGN §12: one path for every client).
  const serving = live.start(() => serveStream(deps, reply, live.assistantMessageId, 0));
  const rounds = await relay(deps, live, first, request);
  const outcome = outcomeOf(rounds, live.cause);
  await settle(deps, live, outcome, rounds.toolCalls);
  await serving;
}

/** Stage 2, body and images: what the schema cannot say (DESIGN §7). */
interface TurnInput {
  readonly body: StreamMessageInput;
  readonly images: ChatImage[];
}

function readInput(deps: Deps, body: StreamMessageInput): TurnInput {
  if (body.text.trim().length === 0) throw invalid('/text', 'must contain a non-whitespace character');
  if (body.personaId !== undefined && !deps.config.catalogue.personas.some((p) => p.personaId === body.personaId)) {
    throw invalid('/personaId', 'is not a known persona');
  }
  return { body, images: decodeImages(body.attachments ?? [], deps.config.maxImageBytes) };
}

/** Stage 3, reads: what the decision needs, read at once, the user's stream lease among them. */
interface TurnReads {
  readonly conversation: repo.ConversationRow | undefined;
  /** The turn an earlier request with this clientMessageId started. */
  readonly prior: repo.PriorTurn | undefined;
  /** The key the turn runs on, or why there is none (refused in its place in the decision). */
  readonly key: UsableProviderKey | AppError;
  /** The market-data key the advisor's market tools use, if one is stored. */
  readonly marketKey: UsableMarketDataKey | undefined;
  /** The conversation's earlier turns that fit the context budget (none for a new conversation), a replaced turn left out. */
  readonly history: repo.HistoryRow[];
  /** The conversation's last turn, read when the request `replaces` it. */
  readonly last: Awaited<ReturnType<typeof repo.lastTurn>>;
  /** The request's claim on the user's stream lease, asked for with these reads. */
  readonly claim: LeaseClaim;
}

/**
 * The rate-limit verdict, the earlier message with this id, the keys (a new conversation's active
 * provider key and the market-data key) and the lease (`claim`, asked for by the caller), in one
 * round trip; the verdict is taken first. An existing conversation's keys and history follow once
 * its provider is known; the history is read under the lease, so a reply that has just ended is in it.
 */
async function readTurn(deps: Deps, userId: string, target: string | null, input: TurnInput, verdict: Promise<void>, claim: LeaseClaim): Promise<TurnReads> {
  const [admitted, conversation, prior, activeKeys, held] = await Promise.allSettled([
    verdict,
    target === null ? undefined : repo.findConversation(deps.db, userId, target),
    repo.findTurnByClientId(deps.db, userId, input.body.clientMessageId),
    target === null ? keysForTurn(deps, userId, null) : undefined,
    claim.held(),
  ]);
  if (admitted.status === 'rejected') throw admitted.reason;
  const found = valueOf(conversation);
  // A missing conversation is refused before the key is looked at; an existing one keeps its provider.
  let keys: TurnKeys = valueOf(activeKeys) ?? { key: new AppError('CONVERSATION_NOT_FOUND', 'conversation not found'), marketKey: undefined };
  let history: repo.HistoryRow[] = [];
  let last: TurnReads['last'];
  if (found) {
    // A turn replaced (regenerate, edit) is not part of the history its replacement is sent.
    if (input.body.replaces !== undefined) last = await repo.lastTurn(deps.db, found.id);
    [keys, history] = await Promise.all([
      keysForTurn(deps, userId, asProvider(found.provider)),
      valueOf(held) ? repo.historyWithin(deps.db, found.id, deps.config.contextBudgetChars, last?.user.seq) : [],
    ]);
  }
  return { conversation: found, prior: valueOf(prior), key: keys.key, marketKey: keys.marketKey, history, last, claim };
}

/** Stage 4, decision: a replay of the stored reply, or the turn to reserve (its provider, model and context). */
interface Replay extends TurnIds {
  readonly kind: 'replay';
  readonly reply: repo.MessageRow;
}

interface NewTurn {
  readonly kind: 'new';
  readonly conversation: repo.ConversationRow | undefined;
  readonly key: UsableProviderKey;
  readonly provider: Provider;
  readonly model: string;
  /** Held: the turn runs under it. */
  readonly claim: LeaseClaim;
  readonly history: repo.HistoryRow[];
  readonly marketKey: UsableMarketDataKey | undefined;
  /** The model takes tools (its catalogue entry does not say `"tools": false`). */
  readonly toolsEnabled: boolean;
  /** The model's catalogue prices (DESIGN §13), when it has them. */
  readonly pricing: PricingConfig | undefined;
  /** The user message (with its reply) this turn takes the place of. */
  readonly replaced: repo.MessageRow | undefined;
}

type Plan = Replay | NewTurn;

/** The checks of TURN_CHECKS.decision, in order. */
async function decide(deps: Deps, userId: string, target: string | null, input: TurnInput, reads: TurnReads): Promise<Plan> {
  const { conversation, claim } = reads;
  if (target !== null && conversation === undefined) throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
  const replay = await idempotentReplay(deps, target, input.body, reads.prior, claim);
  if (replay) return replay;
  const replaced = replacedTurn(input.body.replaces, reads.last);
  if (reads.key instanceof AppError) throw reads.key;
  const key = reads.key;
  // An existing conversation keeps the provider and model it started with.
  const provider = conversation ? asProvider(conversation.provider) : key.provider;
  const model = conversation?.model ?? key.model;
  const entry = findModel(deps.config.catalogue, provider, model);
  if (input.images.length > 0 && entry?.images === false) {
    throw new AppError('IMAGES_NOT_SUPPORTED', `${provider} model ${model} does not take images`);
  }
  // Draining began while this request was being checked (admission saw it too late).
  if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly');
  await claim.token();
  const toolsEnabled = entry?.tools !== false && deps.config.advisorMaxToolCalls > 0;
  return {
    kind: 'new',
    conversation,
    key,
    provider,
    model,
    claim,
    history: reads.history,
    marketKey: reads.marketKey,
    toolsEnabled,
    pricing: entry?.pricing,
    replaced,
  };
}

/** The turn a request `replaces`: the conversation's last user message, whose reply is not streaming (there is none on a new conversation). */
function replacedTurn(replaces: string | undefined, last: TurnReads['last']): repo.MessageRow | undefined {
  if (replaces === undefined) return undefined;
  if (last?.user.id !== replaces) throw invalid('/replaces', 'must be the id of the conversation’s last user message');
  if (last.reply?.status === 'streaming') throw new AppError('STREAM_IN_PROGRESS', 'the reply to the message being replaced is still streaming');
  return last.user;
}

/**
 * DESIGN §7 idempotency: the same id with other text, or sent to another conversation, is a reuse;
 * a reply still streaming is a 409 unless its turn is dead (no lease held, no recent sign of life:
 * its instance crashed), in which case it is closed as a crashed turn and replayed like any finished
 * reply. `claim` is the request's claim on the user's lease.
 */
async function idempotentReplay(
  deps: Deps,
  target: string | null,
  body: StreamMessageInput,
  prior: repo.PriorTurn | undefined,
  claim: LeaseClaim,
): Promise<Replay | undefined> {
  if (!prior) return undefined;
  const sameTarget = target === null ? prior.user.seq === 1 : prior.user.conversation_id === target;
  if (prior.user.content !== body.text || !sameTarget) {
    throw new AppError('CLIENT_MESSAGE_ID_REUSED', 'this clientMessageId was already used for another message');
  }
  if (prior.reply !== undefined && prior.reply.status !== 'streaming') return replayOf(prior, prior.reply);
  // The lease is free, yet the reply streams: its instance is gone, or the lease's store forgot it
  // (restarted empty). The database decides (DESIGN §12 "Under faults"): a turn with a recent sign
  // of life is live; a silent one is closed with what its frame log holds, and charged by it.
  await claim.token();
  const replyId = prior.reply?.id;
  if (replyId !== undefined) {
    if ((await reservationState(deps, replyId)) === 'live') throw new AppError('STREAM_IN_PROGRESS', 'the reply to this message is still streaming');
    await settleCrashed(deps, replyId);
  }
  const again = await repo.findTurnByClientId(deps.db, prior.user.user_id, body.clientMessageId);
  if (again?.reply === undefined || again.reply.status === 'streaming') throw new Error('a stored turn lost its reply row');
  return replayOf(again, again.reply);
}

function replayOf(prior: repo.PriorTurn, reply: repo.MessageRow): Replay {
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

/** Stage 5, reserve and store: a live turn (and what its first round sends), or a replay after a lost race. */
type Started = Replay | { readonly kind: 'live'; readonly live: LiveTurn; readonly request: RoundRequest };

/**
 * The billing reservation and the turn's rows (the user message, its images, the reply placeholder,
 * the conversation) in one statement: one round trip, one commit, both stored or neither. A
 * refusal stores nothing; the lease is given back on any failure.
 */
async function reserveAndStore(deps: Deps, userId: string, target: string | null, input: TurnInput, plan: NewTurn, log: FastifyReply['log']): Promise<Started> {
  const { conversation, key, provider, model, claim } = plan;
  const { body, images } = input;
  const conversationId = conversation?.id ?? deps.ids.uuid();
  const userMessageId = deps.ids.uuid();
  const assistantMessageId = deps.ids.uuid();
  const personaId = body.personaId ?? conversation?.persona_id ?? null;
  const rows: repo.TurnRows = {
    now: deps.clock.now(),
    userId,
    conversationId,
    newConversation: conversation ? undefined : { id: conversationId, title: defaultTitle(body.text), provider, model, persona_id: personaId },
    personaId: body.personaId,
    userMessage: { id: userMessageId, content: body.text, clientMessageId: body.clientMessageId },
    replyId: assistantMessageId,
    attachments: images.map((i) => ({ id: deps.ids.uuid(), format: i.format, data: i.data })),
  };
  try {
    const toolbox = new Toolbox(deps, userId, plan.marketKey, plan.toolsEnabled);
    const system = systemPrompt(deps.config.catalogue, personaId, toolbox.offered, rows.now);
    const request: RoundRequest = { system, messages: buildMessages(plan.history, body.text, images), tools: toolbox.offered };
    const { replaced } = plan;
    const charge = await deps.billing.reserve({ turnId: assistantMessageId, userId, provider, model, images: images.length }, (db, reservation) =>
      replaced === undefined
        ? repo.startReservedTurn(db, rows, reservation)
        : // The one turn that is not one statement: the replaced turn goes in the same transaction.
          db.transaction().execute(async (trx) => {
            await repo.dropLastTurn(trx, conversationId, replaced, { replaced: defaultTitle(replaced.content), next: defaultTitle(body.text) });
            return repo.startReservedTurn(trx, rows, reservation);
          }),
    );
    const billing = { source: charge.source, credits: charge.credits };
    const leaseToken = await claim.handOver();
    const init = {
      conversationId,
      userMessageId,
      assistantMessageId,
      provider,
      model,
      billing,
      userId,
      leaseToken,
      key,
      charge,
      toolbox,
      pricing: plan.pricing,
      log,
    };
    const live = new LiveTurn(deps, init);
    return { kind: 'live', live, request };
  } catch (err) {
    return await afterFailedStart(deps, err, { userId, target, input, plan, turnId: assistantMessageId });
  }
}

/**
 * A start statement that failed: a replay when it lost a race with a concurrent duplicate (the
 * unique index decided), else the error the client gets. One that failed on the connection may have
 * committed all the same: its turn is settled by what it stored.
 */
async function afterFailedStart(
  deps: Deps,
  err: unknown,
  start: { userId: string; target: string | null; input: TurnInput; plan: NewTurn; turnId: string },
): Promise<Replay> {
  const { userId, target, input, plan } = start;
  if ((err instanceof AppError && err.code === 'BILLING_NOT_AVAILABLE') || isDatabaseUnavailable(err)) abandonTurn(deps, start.turnId);
  const code = pgErrorCode(err);
  if (code === UNIQUE_VIOLATION) {
    const prior = await repo.findTurnByClientId(deps.db, userId, input.body.clientMessageId);
    const replayed = await idempotentReplay(deps, target, input.body, prior, plan.claim);
    if (replayed) return replayed;
    throw new AppError('STREAM_IN_PROGRESS', 'another reply is streaming for this conversation');
  }
  // The conversation was deleted meanwhile.
  if ((code === NOT_NULL_VIOLATION || code === FOREIGN_KEY_VIOLATION) && plan.conversation) {
    throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
  }
  throw err;
}

type Failure = { code: StreamErrorCode; retryable: boolean; detail: string; status?: number | undefined };

/** How a turn's rounds ended: the provider's finish, or the failure that cut them (neither: the turn was stopped). */
export interface RoundsEnd {
  readonly finish: FinishReason | undefined;
  readonly failure: Failure | undefined;
  /** Tool calls run (DESIGN §11: `done.toolCalls`). */
  readonly toolCalls: number;
}

/**
 * Stage 6, relay, into the turn's frame log (its clients follow the log, DESIGN §12): rounds with
 * the provider until it answers in text (DESIGN §11): each round's deltas as they come and its tool
 * calls, run by the turn's toolbox while the round still streams, their results sent back in the
 * next round. Nothing is written to the database meanwhile. A key the provider refused is marked
 * (DESIGN §13). Never throws.
 */
async function relay(deps: Deps, live: LiveTurn, firstRound: PendingRound, first: RoundRequest): Promise<RoundsEnd> {
  const { signal, parts, frames } = live;
  const maxCalls = deps.config.advisorMaxToolCalls;
  let round = firstRound;
  let request = first;
  let toolCalls = 0;
  let finish: FinishReason | undefined;
  let failure: Failure | undefined;
  try {
    for (;;) {
      const out = await relayRound(live, round, maxCalls - toolCalls, live.usageOfNextRound());
      toolCalls += out.ran;
      if (out.finish !== 'tool_calls' || out.calls.length === 0 || signal.aborted) {
        finish = out.finish === 'tool_calls' ? 'stop' : out.finish;
        break;
      }
      const results: ToolResultPart[] = [];
      for (const { call, outcome } of out.calls) {
        const result = await outcome;
        parts.addResult(call, result);
        results.push(resultPart(call, result));
        frames.append('tool_result', toolResultData(call, result));
      }
      // A model that calls tools after being told to answer in text gets no further round.
      if (request.toolChoice === 'none') {
        finish = 'stop';
        break;
      }
      const messages = [
        ...request.messages,
        { role: 'assistant', text: out.text, toolCalls: out.calls.map((c) => c.call) },
        { role: 'tool', text: '', toolResults: results },
      ] as const;
      request = { ...request, messages, toolChoice: toolCalls >= maxCalls ? 'none' : 'auto' };
      round = startRound(live, request);
    }
  } catch (err) {
    if (!signal.aborted) failure = toFailure(err, live.log);
  }
  if (failure?.code === 'PROVIDER_AUTH_FAILED') await live.keyRefused(failure.status);
  return { finish, failure, toolCalls };
}

/** How a turn ends: what is stored, and its terminal frame. */
export interface Outcome {
  readonly status: repo.TurnEnd['status'];
  /** The terminal `error` frame's code; undefined: the turn ends with `done`. */
  readonly error: { readonly code: StreamErrorCode; readonly retryable: boolean } | undefined;
  readonly finishReason: FinishReason | 'stopped' | 'aborted';
  /** Why it failed, for the log line. */
  readonly detail: string | undefined;
}

/** What ends a turn stopped from outside before its answer did (undefined: `done`, nothing failed). */
const STOPPED_WITH: Readonly<Record<StopCause, Failure | undefined>> = {
  client: undefined,
  stopped: undefined,
  shutdown: { code: 'SHUTTING_DOWN', retryable: true, detail: 'drain deadline reached' },
  deadline: { code: 'UPSTREAM_TIMEOUT', retryable: true, detail: 'STREAM_MAX_DURATION_MS reached' },
  superseded: { code: 'STREAM_IN_PROGRESS', retryable: false, detail: 'another stream of the user holds the lease' },
};

const ENDED_EARLY: Failure = { code: 'PROVIDER_UNAVAILABLE', retryable: true, detail: 'stream ended early' };

/**
 * Stage 7, the outcome (pure): an answer the provider finished is complete; a turn stopped from
 * outside (a stop, no client left, the drain, another stream) is interrupted, one that ran too long
 * or failed is failed — each with the terminal frame its cause calls for.
 */
export function outcomeOf(rounds: RoundsEnd, cause: StopCause | undefined): Outcome {
  if (rounds.finish !== undefined) return { status: 'complete', error: undefined, finishReason: rounds.finish, detail: undefined };
  const failure = cause === undefined ? (rounds.failure ?? ENDED_EARLY) : STOPPED_WITH[cause];
  return {
    status: cause !== undefined && cause !== 'deadline' ? 'interrupted' : 'failed',
    error: failure && { code: failure.code, retryable: failure.retryable },
    finishReason: cause === 'stopped' ? 'stopped' : 'aborted',
    detail: failure?.detail,
  };
}

/**
 * Stage 8, settle and end: the reply stored with its parts and receipt and the charge settled (one
 * statement; charged if a delta was produced, DESIGN §7), the lease released, then the terminal
 * frame — so a client that has seen `done` finds the reply stored and may send its next message.
 */
async function settle(deps: Deps, live: LiveTurn, outcome: Outcome, toolCalls: number): Promise<void> {
  const { parts, frames } = live;
  const { status, error } = outcome;
  const receipt = live.receipt();
  const end: repo.TurnEnd = {
    replyId: live.assistantMessageId,
    userId: live.userId,
    provider: live.provider,
    model: live.model,
    now: deps.clock.now(),
    content: storable(parts.text),
    parts: parts.stored(),
    status,
    finishReason: error ? null : outcome.finishReason,
    receipt,
    error,
    // The terminal frame is the next one, logged right after the settlement.
    lastFrameId: frames.nextId,
  };
  const terminal = error
    ? { event: 'error' as const, data: errorData(error.code, error.retryable) }
    : { event: 'done' as const, data: doneData(outcome.finishReason, receipt, toolCalls) };
  await live.finish(end, parts.deltas > 0, terminal);
  live.log.info(
    {
      conversationId: live.conversationId,
      provider: live.provider,
      model: live.model,
      outcome: status,
      deltas: parts.deltas,
      toolCalls,
      cause: live.cause,
      error: outcome.detail,
    },
    'advisor stream ended',
  );
}

/** A provider round on its way: its events, and the first read already asked for (or why the call could not start). */
type PendingRound =
  { readonly events: AsyncIterator<readonly ChatEvent[]>; readonly first: Promise<IteratorResult<readonly ChatEvent[]>> } | { readonly failed: unknown };

function startRound(live: LiveTurn, request: RoundRequest): PendingRound {
  try {
    const events = live.round(request);
    const first = events.next();
    first.catch(() => undefined);
    return { events, first };
  } catch (err) {
    return { failed: err };
  }
}

/** A tool call of a round and its outcome, running. */
interface RunningCall {
  readonly call: ToolCallPart;
  readonly outcome: Promise<ToolOutcome>;
}

interface RoundOut {
  /** Undefined: the stream ended without the provider's finish (or the turn was stopped). */
  readonly finish: FinishReason | undefined;
  /** This round's text (the assistant message the next round is sent back). */
  readonly text: string;
  readonly calls: readonly RunningCall[];
  /** Calls started (within the turn's remaining `budget`). */
  readonly ran: number;
}

/**
 * One round: delta and tool_call frames logged as the provider streams them, each call started as soon as
 * its arguments are complete (the calls of a round run concurrently, DESIGN §11); calls beyond the
 * turn's remaining budget are answered TOOL_CALL_LIMIT_REACHED without running. Throws the
 * provider's failure.
 */
async function relayRound(live: LiveTurn, round: PendingRound, budget: number, onUsage: (u: RoundUsage) => void): Promise<RoundOut> {
  if ('failed' in round) throw round.failed;
  const { signal, parts, frames } = live;
  const calls: RunningCall[] = [];
  let text = '';
  let ran = 0;
  let finish: FinishReason | undefined;
  let firstRead: Promise<IteratorResult<readonly ChatEvent[]>> | undefined = round.first;
  try {
    read: for (;;) {
      const next = await (firstRead ?? round.events.next());
      firstRead = undefined;
      if (next.done || signal.aborted) break;
      for (const ev of next.value) {
        if (ev.type === 'delta') {
          text += ev.text;
          parts.addText(ev.text);
          frames.append('delta', deltaData(ev.text));
        } else if (ev.type === 'tool_call') {
          const call = ev.call;
          parts.addCall(call);
          const within = ran < budget;
          if (within) ran++;
          const outcome = within ? live.toolbox.run(call, signal) : Promise.resolve(overLimit(live.toolbox.maxCalls));
          outcome.catch(() => undefined);
          calls.push({ call, outcome });
          frames.append('tool_call', toolCallData(call));
        } else if (ev.type === 'usage') {
          onUsage(ev);
        } else {
          finish = ev.reason;
          break read;
        }
      }
    }
  } finally {
    // The body ends right after the finish; reading it to the end keeps the upstream connection reusable.
    if (finish !== undefined) void drain(round.events);
    else void round.events.return?.().catch(() => undefined);
  }
  return { finish, text, calls, ran };
}

function toFailure(err: unknown, log: FastifyReply['log']): Failure {
  if (err instanceof ProviderError) return { code: err.code, retryable: err.retryable, detail: err.detail, status: err.status };
  log.error({ err }, 'advisor stream failed');
  return { code: 'INTERNAL', retryable: true, detail: 'internal error' };
}

async function drain(events: AsyncIterator<unknown>): Promise<void> {
  try {
    while (!(await events.next()).done);
  } catch {
    // The answer is complete; what happens to the rest of the body does not matter.
  }
}

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `${path}: ${message}`, { details: [{ path, message }] });
}

function valueOf<T>(read: PromiseSettledResult<T>): T {
  if (read.status === 'rejected') throw read.reason;
  return read.value;
}

export function asProvider(name: string): Provider {
  const found = PROVIDERS.find((p) => p === name);
  if (!found) throw new Error(`conversation holds an unknown provider "${name}"`);
  return found;
}
