// An advisor turn, from request to settlement, as named stages run in order by `streamTurn`:
// admission → body and images → start (reads, decision, reservation and storing: one statement) → relay → outcome →
// settle and end.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RawBuilder } from 'kysely';
import { findModel, PROVIDERS, type Provider } from '../../catalogue.ts';
import { FOREIGN_KEY_VIOLATION, UNIQUE_VIOLATION, isDatabaseUnavailable, pgErrorCode } from '../../db/create-db.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { applyDecision } from '../../http/rate-limit.ts';
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
import { openTurnKeys, readTurnKeys, turnKeysPart, type TurnKeyRow, type TurnKeys, type UsableProviderKey } from '../advisor-keys/service.ts';
import { overLimit, Toolbox, type ToolOutcome } from '../advisor-tools/toolbox.ts';
import { reservationState, type TurnCharge } from '../billing/turn-billing.ts';
import { abandonTurn, settleCrashed } from './crashed-turns.ts';
import { buildMessages, defaultTitle, systemPrompt } from './context.ts';
import { deltaData, doneData, errorData, replayTurn, toolCallData, toolResultData, type StreamErrorCode, type TurnIds } from './frames.ts';
import { resultPart, storable } from './parts.ts';
import { serveStream } from './attach.ts';
import { decodeImages } from './images.ts';
import { LiveTurn, type RoundRequest, type StopCause } from './live-turn.ts';
import { LeaseClaim } from './lease-claim.ts';
import { LEASE_TTL_MS } from './stream-runtime.ts';
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

/** How many times a turn's start reads the user's provider key again when it changed meanwhile. */
const KEY_READS = 3;

/** A stream request body up to this size is read while the rate-limit verdict is on its way. */
const READ_BEFORE_VERDICT_BYTES = 64 * 1024;
const NOT_NULL_VIOLATION = '23502';

/**
 * Stage 1, admission (the route's onRequest hook: after authentication, before the body is read).
 * Every request counts (DESIGN §4); an admitted one asks for its user's stream lease in the same step
 * (one Redis round trip). The answer is left in flight while a small body is read and checked, so it
 * costs no wait of its own; a large body (images) is not read at all for a request the limit refuses.
 * The lease goes back however the request ends, unless a live turn took it over.
 */
export function admitTurn(deps: Deps): (req: FastifyRequest, reply: FastifyReply) => Promise<void> {
  return async (req, reply) => {
    if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly');
    const userId = req.user.id;
    const admitted = deps.admission.admit(ADVISOR_MESSAGES, userId, LEASE_TTL_MS);
    const verdict = admitted.then((a) => applyDecision(ADVISOR_MESSAGES, a.decision, reply));
    verdict.catch(() => undefined);
    const claim = new LeaseClaim(
      deps,
      userId,
      admitted.then((a) => a.lease),
    );
    deps.streams.admissions.set(req, { verdict, claim });
    reply.raw.once('close', () => void claim.release());
    if (!(Number(req.headers['content-length']) <= READ_BEFORE_VERDICT_BYTES)) await verdict;
  };
}

/** The route's error handler: a request the limit refuses is a 429 whatever else is wrong with it; the lease goes back first. */
export function refuseAfterVerdict(deps: Deps): (err: unknown, req: FastifyRequest) => Promise<never> {
  return async (err, req) => {
    await deps.streams.admissions.get(req)?.claim.release();
    await deps.streams.verdictOf(req);
    throw err;
  };
}

/** The whole turn: its stages in order. `target` is the conversation, or null to start one. */
export async function streamTurn(deps: Deps, req: FastifyRequest, reply: FastifyReply, target: string | null): Promise<void> {
  const userId = req.user.id;
  const claim = deps.streams.claimOf(req);
  let started: Started;
  try {
    const input = readInput(deps, req.body as StreamMessageInput);
    await deps.streams.verdictOf(req);
    started = await startTurn(deps, { userId, target, input, claim, log: reply.log });
  } catch (err) {
    // Awaited here, so the refusal is handled before the finally gives the lease back.
    return await refuseAfterVerdict(deps)(err, req);
  } finally {
    // A turn that started holds the lease now (handed over); any other outcome gives it back here.
    await claim.release();
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

/** A stream request past its admission and body checks. */
interface TurnRequest {
  readonly userId: string;
  readonly target: string | null;
  readonly input: TurnInput;
  /** The request's claim on its user's stream lease (the admission's). */
  readonly claim: LeaseClaim;
  readonly log: FastifyReply['log'];
}

/** A replay of the stored reply (DESIGN §7 idempotency). */
interface Replay extends TurnIds {
  readonly kind: 'replay';
  readonly reply: repo.MessageRow;
}

/** Stage 3, the start: a live turn (and what its first round sends), or a replay. */
type Started = Replay | { readonly kind: 'live'; readonly live: LiveTurn; readonly request: RoundRequest };

/**
 * Reads, decision, reservation and storing in one statement (repo.startTurn: one round trip, one
 * commit), the checks in TURN_CHECKS' order: a refusal stores and reserves nothing. A message already
 * stored under this clientMessageId is replayed (or refused) by `priorReplay`; a turn that `replaces`
 * the last one reads it first and starts in a transaction that drops it (`replacing`).
 */
async function startTurn(deps: Deps, turn: TurnRequest): Promise<Started> {
  const { userId, target, input, claim } = turn;
  const { body, images } = input;
  const replacing = body.replaces === undefined ? undefined : await turnToReplace(deps, turn, body.replaces);
  if (replacing?.kind === 'replay') return replacing;
  // Draining began while this request was being checked (admission saw it too late).
  if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly');
  const start: repo.TurnStart = {
    now: deps.clock.now(),
    userId,
    target: target ?? undefined,
    conversationId: target ?? deps.ids.uuid(),
    title: defaultTitle(body.text),
    personaId: body.personaId,
    userMessage: { id: deps.ids.uuid(), content: body.text, clientMessageId: body.clientMessageId },
    replyId: deps.ids.uuid(),
    attachments: images.map((i) => ({ id: deps.ids.uuid(), format: i.format, data: i.data })),
    leaseHeld: await claim.held(),
    key: undefined,
    catalogue: catalogueOf(deps),
    historyBudget: deps.config.contextBudgetChars,
  };
  let row: repo.StartRow;
  let charge: TurnCharge | undefined;
  // The user's provider key as this instance last read it; one stored since is read and the start tried again.
  for (let attempt = 1; ; attempt++) {
    const key = deps.streams.knownKeys.get(userId) ?? (await readKey(deps, userId, target));
    try {
      ({ row, charge } = await deps.billing.reserveWithin({ turnId: start.replyId, userId, images: images.length }, (db, reservation) => {
        const parts = { keys: turnKeysPart(userId), reservation };
        if (replacing === undefined) return repo.startTurn(db, { ...start, key }, parts);
        const titles = { replaced: defaultTitle(replacing.user.content), next: start.title };
        return repo.replaceAndStartTurn(db, replacing.user, titles, { ...start, key }, parts);
      }));
    } catch (err) {
      return await afterFailedStart(deps, err, turn, start.replyId);
    }
    if (row.refusal !== 'KEY_CHANGED') break;
    deps.streams.knownKeys.delete(userId);
    if (attempt === KEY_READS) throw new AppError('SERVICE_UNAVAILABLE', 'the provider key kept changing while the turn started; retry');
  }
  if (row.refusal === 'CLIENT_MESSAGE_ID_SEEN') return await priorReplay(deps, turn);
  const provider = row.provider === null ? undefined : asProvider(row.provider);
  const keys = openTurnKeys(deps, target === null ? null : (provider ?? null), keyRowsOf(userId, row));
  if (row.refusal !== null || charge === undefined || provider === undefined) throw refusal(row, keys);
  // The very bytes this instance opened (the statement compared them): they open again.
  if (keys.key instanceof AppError) throw new Error('a provider key that opened no longer opens');
  return { kind: 'live', ...(await liveTurn(deps, turn, start, { row, provider, key: keys.key, marketKey: keys.marketKey, charge })) };
}

/** The client's error for a start statement's refusal (StartRefusal). */
function refusal(row: repo.StartRow, keys: TurnKeys): AppError {
  const { provider, model } = row;
  switch (row.refusal) {
    case 'CONVERSATION_NOT_FOUND':
      return new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
    case 'PROVIDER_KEY_NOT_CONFIGURED':
    case 'PROVIDER_KEY_DECRYPTION_FAILED':
      if (keys.key instanceof AppError) return keys.key;
      break;
    case 'IMAGES_NOT_SUPPORTED':
      return new AppError('IMAGES_NOT_SUPPORTED', `${provider} model ${model} does not take images`);
    case 'STREAM_IN_PROGRESS':
      // The admission did not get the lease: another stream of the user holds it (a store that failed was a 503 already).
      return new AppError('STREAM_IN_PROGRESS', 'another reply is streaming for this user');
    case 'MODEL_NOT_AVAILABLE':
      return new AppError('MODEL_NOT_AVAILABLE', `model ${model} of ${provider} is not available`);
    default:
      break;
  }
  throw new Error(`the turn statement answered refusal ${String(row.refusal)} with source ${String(row.source)}`);
}

/** The catalogue's models as the start statement reads them, built once per configuration. */
const catalogues = new WeakMap<object, RawBuilder<unknown>>();
function catalogueOf(deps: Deps): RawBuilder<unknown> {
  const { catalogue } = deps.config;
  let rows = catalogues.get(catalogue);
  if (rows === undefined) catalogues.set(catalogue, (rows = repo.catalogueRows(catalogue.models)));
  return rows;
}

/** The key rows of a start statement's answer, as the keys feature reads them. */
export function keyRowsOf(userId: string, row: repo.StartRow): TurnKeyRow[] {
  const rows: TurnKeyRow[] = [];
  const sealed = (keyId: string | null, nonce: Uint8Array | null, ciphertext: Uint8Array | null, tag: Uint8Array | null) =>
    keyId === null || nonce === null || ciphertext === null || tag === null ? undefined : { key_id: keyId, nonce, ciphertext, tag };
  const p = sealed(row.p_key_id, row.p_nonce, row.p_ciphertext, row.p_tag);
  if (p && row.provider !== null) rows.push({ kind: 'provider', user_id: userId, provider: row.provider, default_model: row.p_default_model, ...p });
  const m = sealed(row.m_key_id, row.m_nonce, row.m_ciphertext, row.m_tag);
  if (m && row.m_provider !== null) rows.push({ kind: 'market', user_id: userId, provider: row.m_provider, default_model: null, ...m });
  return rows;
}

/** Reads and opens the user's provider key (the conversation's provider's, or the active one), and remembers it as read. */
export async function readKey(deps: Deps, userId: string, target: string | null): Promise<repo.TurnStart['key']> {
  const rows = await readTurnKeys(deps, userId, target === null ? null : repo.conversationProvider(userId, target));
  const row = rows.find((r) => r.kind === 'provider');
  if (row === undefined) return undefined;
  // Copies of their own: the driver's buffers are slices of 8 KiB slabs, and one kept per user would keep its slab.
  const sealed = { key_id: row.key_id, nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.ciphertext), tag: new Uint8Array(row.tag) };
  const known = { sealed, opens: !(openTurnKeys(deps, null, [row]).key instanceof AppError) };
  deps.streams.knownKeys.set(userId, known);
  return known;
}

/** What the start statement answered for a turn that starts. */
interface StartedRow {
  readonly row: repo.StartRow;
  readonly provider: Provider;
  readonly key: UsableProviderKey;
  readonly marketKey: UsableMarketDataKey | undefined;
  readonly charge: TurnCharge;
}

/** Stage 3's end: the live turn (holding the lease from now on) and its first round's request. */
async function liveTurn(deps: Deps, turn: TurnRequest, start: repo.TurnStart, s: StartedRow): Promise<{ live: LiveTurn; request: RoundRequest }> {
  const { userId, input, claim } = turn;
  const { row, provider, key, charge } = s;
  const model = row.model ?? key.model;
  const entry = findModel(deps.config.catalogue, provider, model);
  const toolbox = new Toolbox(deps, userId, s.marketKey, entry?.tools !== false && deps.config.advisorMaxToolCalls > 0);
  const system = systemPrompt(deps.config.catalogue, row.persona_id, toolbox.offered, start.now);
  const request: RoundRequest = { system, messages: buildMessages(row.history, input.body.text, input.images), tools: toolbox.offered };
  const live = new LiveTurn(deps, {
    conversationId: start.conversationId,
    userMessageId: start.userMessage.id,
    assistantMessageId: start.replyId,
    provider,
    model,
    billing: { source: charge.source, credits: charge.credits },
    userId,
    leaseToken: await claim.handOver(),
    key,
    charge,
    toolbox,
    pricing: entry?.pricing,
    log: turn.log,
  });
  return { live, request };
}

/**
 * A turn that `replaces` the conversation's last: the conversation, an earlier message with this
 * clientMessageId and the last turn, read at once and checked in TURN_CHECKS' order; the user message
 * to replace, or a replay.
 */
async function turnToReplace(deps: Deps, turn: TurnRequest, replaces: string): Promise<Replay | { kind: 'replace'; user: repo.MessageRow }> {
  const { userId, target, input } = turn;
  if (target === null) throw invalid('/replaces', 'must be the id of the conversation’s last user message');
  const [conversation, prior, last] = await Promise.all([
    repo.findConversation(deps.db, userId, target),
    repo.findTurnByClientId(deps.db, userId, input.body.clientMessageId),
    repo.lastTurn(deps.db, target),
  ]);
  if (conversation === undefined) throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
  const replay = await idempotentReplay(deps, target, input.body, prior, turn.claim);
  if (replay) return replay;
  if (last?.user.id !== replaces) throw invalid('/replaces', 'must be the id of the conversation’s last user message');
  if (last.reply?.status === 'streaming') throw new AppError('STREAM_IN_PROGRESS', 'the reply to the message being replaced is still streaming');
  return { kind: 'replace', user: last.user };
}

/** A message already stored under this clientMessageId: its replay, or the refusal; one that vanished meanwhile (its conversation deleted) starts anew. */
async function priorReplay(deps: Deps, turn: TurnRequest): Promise<Started> {
  const prior = await repo.findTurnByClientId(deps.db, turn.userId, turn.input.body.clientMessageId);
  return (await idempotentReplay(deps, turn.target, turn.input.body, prior, turn.claim)) ?? startTurn(deps, turn);
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

/**
 * A start statement that failed: a replay when it lost a race with a concurrent duplicate (the
 * unique index decided), else the error the client gets. One that failed on the connection may have
 * committed all the same: its turn is settled by what it stored.
 */
async function afterFailedStart(deps: Deps, err: unknown, turn: TurnRequest, turnId: string): Promise<Replay> {
  const { userId, target, input } = turn;
  if ((err instanceof AppError && err.code === 'BILLING_NOT_AVAILABLE') || isDatabaseUnavailable(err)) abandonTurn(deps, turnId);
  const code = pgErrorCode(err);
  if (code === UNIQUE_VIOLATION) {
    const prior = await repo.findTurnByClientId(deps.db, userId, input.body.clientMessageId);
    const replayed = await idempotentReplay(deps, target, input.body, prior, turn.claim);
    if (replayed) return replayed;
    throw new AppError('STREAM_IN_PROGRESS', 'another reply is streaming for this conversation');
  }
  // The conversation was deleted meanwhile.
  if ((code === NOT_NULL_VIOLATION || code === FOREIGN_KEY_VIOLATION) && target !== null) {
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
 * Stage 4, relay, into the turn's frame log (its clients follow the log, DESIGN §12): rounds with
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
 * Stage 5, the outcome (pure): an answer the provider finished is complete; a turn stopped from
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
 * Stage 6, settle and end: the reply stored with its parts and receipt and the charge settled (one
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
  const stored = await live.finish(end, parts.deltas > 0, terminal);
  live.log.info(
    {
      conversationId: live.conversationId,
      provider: live.provider,
      model: live.model,
      // What the client was told: a reply whose end could not be stored ended as the sweeper will store it.
      outcome: stored ? status : repo.STREAMING_LEFT_BEHIND.status,
      ...(stored ? {} : { endStored: false }),
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

export function asProvider(name: string): Provider {
  const found = PROVIDERS.find((p) => p === name);
  if (!found) throw new Error(`conversation holds an unknown provider "${name}"`);
  return found;
}
