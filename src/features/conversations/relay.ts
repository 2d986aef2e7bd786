// Stage 4 of a turn, relay: the provider's rounds into the turn's frame log, tool calls run as they come.
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../deps.ts';
import { ProviderError, type ChatEvent, type FinishReason, type RoundUsage, type ToolCallPart, type ToolResultPart } from '../../providers/llm/index.ts';
import { overLimit, type ToolOutcome } from '../advisor-tools/toolbox.ts';
import { deltaData, toolCallData, toolResultData, type StreamErrorCode } from './frames.ts';
import type { LiveTurn, RoundRequest } from './live-turn.ts';
import { resultPart } from './parts.ts';
import { firstDelta, PROVIDER_CALL, traced } from '../../platform/tracing.ts';

export type Failure = { code: StreamErrorCode; retryable: boolean; detail: string; status?: number | undefined };

/** How a turn's rounds ended: the provider's finish, or the failure that cut them (neither: the turn was stopped). */
export interface RoundsEnd {
  readonly finish: FinishReason | undefined;
  readonly failure: Failure | undefined;
  /** Tool calls run (DESIGN §11: `done.toolCalls`). */
  readonly toolCalls: number;
}

/**
 * The relay, into the turn's frame log (its clients follow the log, DESIGN §12): rounds with
 * the provider until it answers in text (DESIGN §11): each round's deltas as they come and its tool
 * calls, run by the turn's toolbox while the round still streams, their results sent back in the
 * next round. Nothing is written to the database meanwhile. A key the provider refused is marked
 * (DESIGN §13). Never throws.
 */
export async function relay(deps: Deps, live: LiveTurn, firstRound: PendingRound, first: RoundRequest): Promise<RoundsEnd> {
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

/** A provider round on its way: its events, and the first read already asked for (or why the call could not start). */
type PendingRound =
  { readonly events: AsyncIterator<readonly ChatEvent[]>; readonly first: Promise<IteratorResult<readonly ChatEvent[]>> } | { readonly failed: unknown };

export function startRound(live: LiveTurn, request: RoundRequest): PendingRound {
  try {
    const events = live.round(request);
    const first = traced(live, PROVIDER_CALL, events.next());
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
          if (parts.deltas === 1) firstDelta(live);
        } else if (ev.type === 'tool_call') {
          const call = ev.call;
          parts.addCall(call);
          const within = ran < budget;
          if (within) ran++;
          const outcome = within
            ? traced(live, 'advisor.tool_call', live.toolbox.run(call, signal), { 'advisor.tool': call.name })
            : Promise.resolve(overLimit(live.toolbox.maxCalls));
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
