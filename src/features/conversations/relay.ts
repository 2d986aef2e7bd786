import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import { isDatabaseUnavailable } from '../../db/create-db.ts';
import type { Deps } from '../../deps.ts';
import { SseWriter } from '../../http/sse.ts';
import { ProviderError, streamChat, type ChatEvent, type FinishReason } from '../../providers/llm/index.ts';
import * as repo from './repo.ts';
import { LEASE_TTL_MS, type LiveTurn, type ReplayTurn, type TurnIds } from './start-turn.ts';

/** Generous for an advisor answer; every protocol gets it in its own field (Anthropic requires one). */
export const MAX_OUTPUT_TOKENS = 8192;
const RENEW_EVERY_MS = LEASE_TTL_MS / 3;
const SHUTDOWN_FLUSH_MS = 1000;
const SETTLE_ATTEMPTS = 3;
const SETTLE_RETRY_MS = 100;

export type StreamErrorCode = ProviderError['code'] | 'SHUTTING_DOWN' | 'INTERNAL';

/** Fixed texts: a provider's own error text can echo part of the key, so it is never forwarded. */
const MESSAGES: Record<StreamErrorCode, string> = {
  PROVIDER_AUTH_FAILED: 'The provider rejected the API key; save a valid key',
  PROVIDER_RATE_LIMITED: 'The provider is rate limiting this key; try again shortly',
  PROVIDER_UNAVAILABLE: 'The provider is unavailable or the connection to it was lost',
  PROVIDER_ERROR: 'The provider could not process this request',
  UPSTREAM_TIMEOUT: 'The provider sent nothing for too long',
  SHUTTING_DOWN: 'The service is restarting; send the message again with a new clientMessageId',
  INTERNAL: 'Internal error',
};

function startData(t: TurnIds): string {
  return JSON.stringify({
    conversationId: t.conversationId,
    userMessageId: t.userMessageId,
    assistantMessageId: t.assistantMessageId,
    provider: t.provider,
    model: t.model,
    billing: { source: t.billing.source, credits: t.billing.credits },
  });
}

const deltaData = (text: string): string => `{"text":${JSON.stringify(text)}}`;
const doneData = (finishReason: FinishReason | 'aborted', input: number, output: number): string =>
  `{"finishReason":"${finishReason}","usage":{"inputTokens":${input},"outputTokens":${output}}}`;
const errorData = (code: string, retryable: boolean): string =>
  JSON.stringify({ code, message: MESSAGES[code as StreamErrorCode] ?? MESSAGES.INTERNAL, retryable });

/** What the process-wide tickers need of a live stream. */
interface Live {
  readonly sse: SseWriter;
  readonly turn: LiveTurn;
  readonly log: FastifyReply['log'];
}

/** A ticker's interval is cut into at most this many slots, each at least a second long. */
const MAX_SLOTS = 10;

/**
 * Runs `each` over every member once per interval on one timer, however many members there are
 * (instead of a timer per stream), and only while there are members. Members are dealt round-robin
 * into slots and one slot is served per tick, so the work (a ping write, a Redis call) is spread
 * over the interval rather than done for thousands of streams at once. A member's first turn comes
 * within one interval of joining, then one every interval.
 */
class Ticker {
  readonly #slots: Set<Live>[];
  readonly #tickMs: number;
  readonly #each: (live: Live) => void;
  #size = 0;
  #dealt = 0;
  #turn = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(intervalMs: number, each: (live: Live) => void) {
    const slots = Math.max(1, Math.min(MAX_SLOTS, Math.floor(intervalMs / 1000)));
    this.#slots = Array.from({ length: slots }, () => new Set<Live>());
    this.#tickMs = intervalMs / slots;
    this.#each = each;
  }

  add(live: Live): void {
    const slot = this.#slots[this.#dealt++ % this.#slots.length];
    if (slot === undefined) return;
    slot.add(live);
    this.#size++;
    this.#timer ??= setInterval(Ticker.#tick, this.#tickMs, this);
  }

  delete(live: Live): void {
    for (const slot of this.#slots) {
      if (!slot.delete(live)) continue;
      if (--this.#size === 0 && this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
      return;
    }
  }

  static #tick(t: Ticker): void {
    const slot = t.#slots[t.#turn++ % t.#slots.length];
    if (slot !== undefined) for (const live of slot) t.#each(live);
  }
}

/** The heartbeat and lease-renewal tickers of one app (tests run several apps, with their own settings, in one process). */
const tickers = new WeakMap<Deps, { heartbeat: Ticker; renewal: Ticker }>();

function tickersOf(deps: Deps): { heartbeat: Ticker; renewal: Ticker } {
  let t = tickers.get(deps);
  if (t === undefined) {
    t = {
      heartbeat: new Ticker(deps.config.streamHeartbeatMs, ping),
      renewal: new Ticker(RENEW_EVERY_MS, (live) => void renewLease(deps, live.turn, live.log)),
    };
    tickers.set(deps, t);
  }
  return t;
}

function ping(live: Live): void {
  // A backed-up socket does not need keep-alives, and must not grow.
  if (!live.sse.needsDrain) live.sse.comment('ping');
}

const CLIENT_GONE = new Error('client went away');
const SHUTDOWN = new Error('service is shutting down');

type Failure = { code: StreamErrorCode; retryable: boolean; detail: string };

/**
 * Streams a live turn: start frame, the provider's deltas as they come (waiting for the socket when
 * it is full, which stops reading upstream), then exactly one of done / error. Nothing is written
 * to the database until the turn ends; then the reply is stored, the charge settled and the lease
 * released before the last frame goes out, so a client that has seen `done` can send its next
 * message at once and will find the reply stored. Never throws.
 */
export async function relayTurn(deps: Deps, reply: FastifyReply, turn: LiveTurn): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  const log = reply.log;
  const sse = new SseWriter(raw);
  const ac = new AbortController();
  let cause: 'client' | 'shutdown' | undefined;
  let settled = false;
  const stop = (why: 'client' | 'shutdown'): void => {
    if (settled || cause !== undefined) return;
    cause = why;
    ac.abort(why === 'client' ? CLIENT_GONE : SHUTDOWN);
  };
  const onClose = (): void => stop('client');
  raw.on('close', onClose);
  const untrack = deps.lifecycle.track(() => stop('shutdown'));
  deps.metrics.streamsOpen.inc();

  // The provider call goes out first, and the start frame is written while it is on its way: the
  // turn is stored by now (DESIGN §7), and the frame's write is then off the path to the first delta.
  let events: AsyncIterator<readonly ChatEvent[]> | undefined;
  let firstRead: Promise<IteratorResult<readonly ChatEvent[]>> | undefined;
  let early: unknown;
  try {
    events = callProvider(deps, turn, ac.signal);
    firstRead = events.next();
    firstRead.catch(() => undefined);
  } catch (err) {
    early = err;
  }
  sse.open(reply.getHeaders());
  sse.event('start', startData(turn));
  const live: Live = { sse, turn, log };
  const { heartbeat, renewal } = tickersOf(deps);
  heartbeat.add(live);
  renewal.add(live);

  let text = '';
  let deltas = 0;
  let usage: { input: number; output: number } | undefined;
  let finish: FinishReason | undefined;
  let failure: Failure | undefined;
  // Gone while the turn was being prepared (the close event fired before anyone listened), or a
  // drain that began meanwhile and will not wait for a stream it never saw.
  if (raw.destroyed) stop('client');
  else if (deps.lifecycle.draining) stop('shutdown');
  try {
    if (early !== undefined || events === undefined) throw early;
    read: for (;;) {
      const next = await (firstRead ?? events.next());
      firstRead = undefined;
      if (next.done || ac.signal.aborted) break;
      for (const ev of next.value) {
        if (ev.type === 'delta') {
          text += ev.text;
          deltas++;
          if (!sse.event('delta', deltaData(ev.text))) {
            await sse.drained(ac.signal);
            if (ac.signal.aborted) break read;
          }
        } else if (ev.type === 'usage') {
          usage = { input: ev.input, output: ev.output };
        } else {
          finish = ev.reason;
          break read;
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) failure = toFailure(err, log);
  }
  heartbeat.delete(live);
  renewal.delete(live);
  if (finish !== undefined) {
    // The body ends right after the finish; reading it to the end keeps the upstream connection reusable.
    if (events) void drain(events);
  } else {
    void events?.return?.().catch(() => undefined);
    if (cause === 'shutdown') failure = { code: 'SHUTTING_DOWN', retryable: true, detail: 'drain deadline reached' };
    else if (cause === 'client') failure = undefined;
    else failure ??= { code: 'PROVIDER_UNAVAILABLE', retryable: true, detail: 'stream ended early' };
  }
  settled = true;
  raw.off('close', onClose);

  const status = finish !== undefined ? 'complete' : cause !== undefined ? 'interrupted' : 'failed';
  const error = finish === undefined && failure ? { code: failure.code, retryable: failure.retryable } : undefined;
  await settle(deps, turn, log, {
    replyId: turn.assistantMessageId,
    now: deps.clock.now(),
    content: text,
    status,
    finishReason: finish ?? (cause === 'client' ? 'aborted' : null),
    usage,
    error,
  }, deltas > 0);

  if (finish !== undefined) sse.event('done', doneData(finish, usage?.input ?? 0, usage?.output ?? 0));
  else if (error) sse.event('error', errorData(error.code, error.retryable));
  sse.end();
  // At shutdown a client that stopped reading must not hold the server open.
  if (cause === 'shutdown') setTimeout(() => raw.writableFinished || raw.destroy(), SHUTDOWN_FLUSH_MS).unref();
  untrack();
  deps.metrics.streamsOpen.dec();
  deps.metrics.streamsTotal.inc({ provider: turn.provider, outcome: status });
  log.info(
    { conversationId: turn.conversationId, provider: turn.provider, model: turn.model, outcome: status, deltas, cause, error: failure?.detail },
    'advisor stream ended',
  );
}

function callProvider(deps: Deps, turn: LiveTurn, signal: AbortSignal): AsyncIterator<readonly ChatEvent[]> {
  const upstream = turn.upstream;
  turn.upstream = undefined;
  if (upstream === undefined) throw new Error('a live turn was relayed twice');
  const target = {
    agent: deps.upstream,
    baseUrl: deps.config.providerBaseUrls[turn.provider],
    apiKey: upstream.apiKey,
    idleTimeoutMs: deps.config.streamIdleTimeoutMs,
  };
  const request = { model: turn.model, system: upstream.system, messages: upstream.messages, maxTokens: MAX_OUTPUT_TOKENS, signal };
  return streamChat(turn.provider, target, request)[Symbol.asyncIterator]();
}

function toFailure(err: unknown, log: FastifyReply['log']): Failure {
  if (err instanceof ProviderError) return { code: err.code, retryable: err.retryable, detail: err.detail };
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

/**
 * A write that lost its connection (a terminated backend, a failover) is tried again on a fresh one:
 * the client is told the turn ended only after this, so what it saw must be what is stored and
 * charged. Both writes are idempotent (an update by id; a settlement of a still-reserved charge).
 */
async function persist(op: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (attempt >= SETTLE_ATTEMPTS || !isDatabaseUnavailable(err)) throw err;
      await sleep(SETTLE_RETRY_MS * attempt);
    }
  }
}

/** Stores the reply, settles the charge, releases the lease: each attempted whatever the others do. */
async function settle(deps: Deps, turn: LiveTurn, log: FastifyReply['log'], end: repo.TurnEnd, produced: boolean): Promise<void> {
  try {
    await persist(() => repo.finishTurn(deps.db, end));
  } catch (err) {
    log.error({ err, assistantMessageId: turn.assistantMessageId }, 'storing the reply failed');
  }
  try {
    await persist(() => deps.billing.settle(turn.charge, produced));
  } catch (err) {
    log.error({ err, turnId: turn.charge.turnId }, 'settling the turn failed');
  }
  try {
    await deps.leases.release(turn.userId, turn.leaseToken);
  } catch (err) {
    log.error({ err }, 'releasing the stream lease failed');
  }
}

async function renewLease(deps: Deps, turn: LiveTurn, log: FastifyReply['log']): Promise<void> {
  try {
    // Losing it means it expired (a stall longer than its ttl); the turn still finishes and stores.
    if (!(await deps.leases.renew(turn.userId, turn.leaseToken, LEASE_TTL_MS))) log.warn('stream lease was lost');
  } catch (err) {
    log.warn({ err }, 'renewing the stream lease failed');
  }
}

/** An idempotent retry of a finished turn: the stored reply as one stream, same ids, nothing new. */
export function replayTurn(reply: FastifyReply, turn: ReplayTurn): void {
  reply.hijack();
  const sse = new SseWriter(reply.raw);
  const r = turn.reply;
  sse.open(reply.getHeaders());
  sse.event('start', startData(turn));
  if (r.content.length > 0) sse.event('delta', deltaData(r.content));
  if (r.error_code !== null) {
    sse.event('error', errorData(r.error_code, r.error_retryable ?? true));
  } else {
    const reason = r.status === 'complete' ? ((r.finish_reason ?? 'stop') as FinishReason) : 'aborted';
    sse.event('done', doneData(reason, r.input_tokens ?? 0, r.output_tokens ?? 0));
  }
  sse.end();
}
