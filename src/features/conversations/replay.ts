// Stage 3's other answer, the idempotent replay (DESIGN §7): a message already stored under this
// clientMessageId is replayed from what was stored, or refused; and the checks of a turn that
// `replaces` the conversation's last.
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { reservationState } from '../billing/turn-billing.ts';
import { settleCrashed } from './crashed-turns.ts';
import type { TurnIds } from './frames.ts';
import { asProvider, invalid, type TurnRequest } from './input.ts';
import { streamInProgress } from './in-progress.ts';
import type { LeaseClaim } from './lease-claim.ts';
import * as repo from './repo.ts';
import type { StreamMessageInput } from './schemas.ts';

/** A replay of the stored reply (DESIGN §7 idempotency). */
export interface Replay extends TurnIds {
  readonly kind: 'replay';
  readonly reply: repo.MessageRow;
}

/**
 * A turn that `replaces` the conversation's last: the conversation, an earlier message with this
 * clientMessageId and the last turn, read at once and checked in TURN_CHECKS' order; the user message
 * to replace, or a replay.
 */
export async function turnToReplace(deps: Deps, turn: TurnRequest, replaces: string): Promise<Replay | Replacing> {
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
  if (last.reply?.status === 'streaming') throw streamInProgress('replaced');
  return { kind: 'replace', user: last.user, cutReplyId: cutByService(last.reply) ? last.reply?.id : undefined, conversationId: target };
}

/** DESIGN §7: a reply the service cut — ended SHUTTING_DOWN by a drain, or closed by the crash sweeper. */
function cutByService(reply: repo.MessageRow | undefined): reply is repo.MessageRow {
  return reply?.status === repo.STREAMING_LEFT_BEHIND.status && reply.error_code === repo.STREAMING_LEFT_BEHIND.error_code;
}

/** The turn a new one takes the place of: its user message, and its reply when the service cut it (DESIGN §7: its charge is given back). */
export interface Replacing {
  readonly kind: 'replace';
  readonly user: repo.MessageRow;
  /** The reply, when it ended SHUTTING_DOWN (a drain, or closed by the crash sweeper). */
  readonly cutReplyId: string | undefined;
  /** The conversation both turns belong to. */
  readonly conversationId: string;
}

/**
 * A message already stored under this clientMessageId: its replay, the refusal, or — its reply cut by
 * the service and still its conversation's last turn — the turn to replace with it (DESIGN §7: sent
 * again, it runs again and the cut turn's charge is given back); undefined when it vanished meanwhile
 * (its conversation deleted).
 */
export async function priorReplay(deps: Deps, turn: TurnRequest): Promise<Replay | Replacing | undefined> {
  const prior = await repo.findTurnByClientId(deps.db, turn.userId, turn.input.body.clientMessageId);
  return await idempotentReplay(deps, turn.target, turn.input.body, prior, turn.claim);
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
): Promise<Replay | Replacing | undefined> {
  if (!prior) return undefined;
  const sameTarget = target === null ? prior.user.seq === 1 : prior.user.conversation_id === target;
  if (prior.user.content !== body.text || !sameTarget) {
    throw new AppError('CLIENT_MESSAGE_ID_REUSED', 'this clientMessageId was already used for another message');
  }
  if (prior.reply !== undefined && prior.reply.status !== 'streaming') return replayOrRun(deps, prior, prior.reply);
  // The lease is free, yet the reply streams: its instance is gone, or the lease's store forgot it
  // (restarted empty). The database decides (DESIGN §12 "Under faults"): a turn with a recent sign
  // of life is live; a silent one is closed with what its frame log holds, and charged by it.
  await claim.token();
  const replyId = prior.reply?.id;
  if (replyId !== undefined) {
    if ((await reservationState(deps, replyId)) === 'live') throw streamInProgress('reply');
    await settleCrashed(deps, replyId);
  }
  const again = await repo.findTurnByClientId(deps.db, prior.user.user_id, body.clientMessageId);
  if (again?.reply === undefined || again.reply.status === 'streaming') throw new Error('a stored turn lost its reply row');
  return replayOrRun(deps, again, again.reply);
}

/** An ended reply replayed — unless the service cut it and it is still its conversation's last turn: then the message runs again in its place. */
async function replayOrRun(deps: Deps, prior: repo.PriorTurn, reply: repo.MessageRow): Promise<Replay | Replacing> {
  if (cutByService(reply)) {
    const last = await repo.lastTurn(deps.db, prior.user.conversation_id);
    if (last?.user.id === prior.user.id) return { kind: 'replace', user: prior.user, cutReplyId: reply.id, conversationId: prior.user.conversation_id };
  }
  return replayOf(prior, reply);
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
