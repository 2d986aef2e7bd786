// An advisor turn, from request to settlement, as named stages run in order by `streamTurn`:
// admission (admission.ts) → body and images (input.ts) → start: reads, decision, reservation and
// storing in one statement (start.ts), or a replay of the stored reply (replay.ts) → relay (relay.ts) →
// outcome → settle and end (here).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.ts';
import type { FinishReason } from '../../providers/llm/index.ts';
import { underAdmission } from './admission.ts';
import { serveStream } from './attach.ts';
import { doneData, errorData, replayTurn, type StreamErrorCode } from './frames.ts';
import { groundReply } from './grounding.ts';
import { readInput } from './input.ts';
import type { LiveTurn, StopCause } from './live-turn.ts';
import { storable } from './parts.ts';
import { relay, startRound, type Failure, type RoundsEnd } from './relay.ts';
import * as repo from './repo.ts';
import type * as statements from './turn-statements.ts';
import type { StreamMessageInput } from './schemas.ts';
import { startTurn } from './start.ts';
import { traceTurn, traced, turnEnded } from '../../platform/tracing.ts';

/**
 * Every refusal of a stream request, stage by stage in the order they are checked (DESIGN §3, §7).
 * A refusal stores, reserves and calls nothing. The route's description is written from this list.
 */
const TURN_CHECKS = {
  admission: [
    '503 SERVICE_UNAVAILABLE while draining, or with MAX_OPEN_STREAMS streams open on the instance (DESIGN §16)',
    '429 RATE_LIMITED (30 per rolling 60 s per user, counted before the body is read)',
  ],
  body: [
    '413 PAYLOAD_TOO_LARGE',
    '400 VALIDATION_ERROR (schema, whitespace-only text, unknown personaId)',
    'per image 400 IMAGE_INVALID (base64) / 413 IMAGE_TOO_LARGE / 400 IMAGE_INVALID (bytes not of the declared format)',
  ],
  decision: [
    '404 CONVERSATION_NOT_FOUND',
    'clientMessageId: 409 CLIENT_MESSAGE_ID_REUSED, 409 STREAM_IN_PROGRESS while its reply streams, or a replay of the stored reply ' +
      '(a reply the service cut, SHUTTING_DOWN, runs again in its place while it is the last turn)',
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

/** The whole turn: its stages in order. `target` is the conversation, or null to start one. */
export async function streamTurn(deps: Deps, req: FastifyRequest, reply: FastifyReply, target: string | null): Promise<void> {
  const userId = req.user.id;
  // A turn that started holds the lease now (handed over); any other outcome gives it back as the start ends.
  const started = await underAdmission(req, async ({ verdict, claim }) => {
    const input = readInput(deps, req.body as StreamMessageInput);
    await verdict;
    return await startTurn(deps, { userId, target, input, claim, log: reply.log });
  });
  // Up to 18 MB of base64 is decoded and stored by now; the stream may last minutes.
  (req as { body: unknown }).body = null;
  if (started.kind === 'replay') return replayTurn(reply, started, started.reply);
  const { live, request } = started;
  traceTurn(live, req.raw, live.provider, live.model);
  // The provider call goes out first, and the start frame is logged while it is on its way: the
  // turn is stored by now (DESIGN §7), and the frame's write is then off the path to the first delta.
  const first = startRound(live, request);
  // The request's own client is the turn's first follower (DESIGN §12: one path for every client).
  const serving = live.start(() => serveStream(deps, reply, live.assistantMessageId, 0));
  const rounds = await relay(deps, live, first, request);
  const outcome = outcomeOf(rounds, live.cause);
  turnEnded(live, live.cause === undefined ? rounds.failure?.code : undefined);
  await settle(deps, live, outcome, rounds.toolCalls);
  await serving;
}

/** How a turn ends: what is stored, and its terminal frame. */
export interface Outcome {
  readonly status: statements.TurnEnd['status'];
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
  const content = storable(parts.text);
  // DESIGN §18, on whatever the reply holds however it ended; a failed turn's goes with its stored reply (its `error` frame has none).
  const grounding = groundReply(content, parts.parts, live.userText);
  const end: statements.TurnEnd = {
    replyId: live.assistantMessageId,
    userId: live.userId,
    provider: live.provider,
    model: live.model,
    now: deps.clock.now(),
    content,
    parts: parts.stored(),
    status,
    finishReason: error ? null : outcome.finishReason,
    receipt,
    error,
    // The terminal frame is the next one, logged right after the settlement.
    lastFrameId: frames.nextId,
    grounding,
  };
  const terminal = error
    ? { event: 'error' as const, data: errorData(error.code, error.retryable) }
    : { event: 'done' as const, data: doneData(outcome.finishReason, receipt, toolCalls, grounding) };
  const stored = await traced(live, 'advisor.settle', live.finish(end, parts.deltas > 0, terminal));
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
