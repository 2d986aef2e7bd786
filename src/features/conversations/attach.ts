// DESIGN §12: the clients of a turn's stream — the request that started it, and any that attach
// later from any instance (a reload, a flaky network, another instance behind the load balancer) —
// each a follower of the turn's frame log. And the stop of a turn, from any instance.
import type { FastifyReply } from 'fastify';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { SseWriter } from '../../http/sse.ts';
import { wireOf, type Frame } from '../../platform/frames.ts';
import type { FirstLook, FrameSink } from '../../platform/frame-log.ts';
import { replyInLog } from './crashed-turns.ts';
import { errorData, snapshotData, storedGrounding, storedReceipt, storedTerminal } from './frames.ts';
import { apiParts } from './parts.ts';
import * as repo from './repo.ts';
import type * as statements from './turn-statements.ts';

/**
 * Serves the frames of a turn after `after` on `reply` (hijacked), then follows the turn live until
 * its terminal frame, the client's going, or — for a turn whose instance is gone — what was stored.
 * `ended`: the stored reply of a turn that has ended (undefined while it runs). A client that reads
 * nothing for STREAM_STALL_TIMEOUT_MS while frames wait is cut off (the turn runs on, DESIGN §12).
 * `first`: the client's first look at the log, taken before it was answered.
 */
export async function serveStream(deps: Deps, reply: FastifyReply, turnId: string, after: number, ended?: repo.MessageRow, first?: FirstLook): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  const sse = new SseWriter(raw, { stallMs: deps.config.streamStallTimeoutMs });
  sse.open(reply.getHeaders());
  const gone = new AbortController();
  const onClose = (): void => gone.abort();
  raw.on('close', onClose);
  if (raw.destroyed) gone.abort();
  const pinger = deps.streams.pings;
  pinger.add(sse);
  let pos = after;
  const sink: FrameSink = {
    write(frames) {
      pos = frames.at(-1)?.id ?? pos;
      return sse.write(frames);
    },
    drained: (signal) => sse.drained(signal),
  };
  try {
    const end = await deps.frames.follow(turnId, after, sink, { live: ended === undefined, signal: gone.signal, ...(first ? { first } : {}) });
    if (end === 'missing' || end === 'silent') {
      // An ended reply no longer changes; one that was running is looked at again.
      const row = ended ?? (await repo.findMessage(deps.db, turnId));
      if (row?.status === 'streaming') {
        if (end === 'silent') await endOfDeadInstance(deps, sink, row);
      } else if (row !== undefined) {
        endFromStored(sink, row, pos);
      }
    }
  } catch (err) {
    reply.log.error({ err, turnId }, 'following a turn failed');
  } finally {
    pinger.delete(sse);
    raw.off('close', onClose);
    sse.end();
  }
}

/**
 * DESIGN §12 "Under faults": a reply still `streaming` after a silent log belongs to an instance that is
 * gone, which may have sent its clients frames it never logged (the last write interval): an id of
 * theirs must never name another frame. This client ends as the sweeper will close the turn, at the
 * ids it will store: the reply its log holds as a snapshot (CRASHED_TERMINAL_ID − 1) and error
 * SHUTTING_DOWN (CRASHED_TERMINAL_ID) — above any id a client holds, so the snapshot's text replaces
 * whatever it had. A log that cannot be read gives the reply as stored.
 */
async function endOfDeadInstance(deps: Deps, sink: FrameSink, row: repo.MessageRow): Promise<void> {
  const held = await deps.frames.held(row.id).catch(() => undefined);
  const reply = held === undefined ? { content: row.content, parts: row.parts } : replyInLog(held);
  const parts = apiParts(typeof reply.parts === 'string' ? JSON.parse(reply.parts) : reply.parts, reply.content);
  const left = repo.STREAMING_LEFT_BEHIND;
  const end = repo.CRASHED_TERMINAL_ID;
  sink.write([
    { id: end - 1, wire: wireOf(end - 1, 'snapshot', snapshotData(row.id, left.status, reply.content, parts, undefined)) },
    { id: end, wire: wireOf(end, 'error', errorData(left.error_code, left.error_retryable)) },
  ]);
}

/** The log holds nothing more for this client: the ended reply as stored, as a snapshot and its terminal frame (ids that follow the client's). */
function endFromStored(sink: FrameSink, row: repo.MessageRow, pos: number): void {
  // The stream's own terminal id (for a crashed turn's reply, CRASHED_TERMINAL_ID: above any id a client
  // holds); a reply closed before ids were stored has none, and gets ids after the client's.
  const terminalId = row.last_frame_id ?? pos + 2;
  if (terminalId <= pos) return;
  const frames: Frame[] = [];
  const snapId = terminalId - 1;
  if (snapId > pos) {
    const parts = apiParts(row.parts, row.content);
    frames.push({
      id: snapId,
      wire: wireOf(snapId, 'snapshot', snapshotData(row.id, row.status, row.content, parts, storedReceipt(row), storedGrounding(row))),
    });
  }
  const terminal = storedTerminal(row);
  frames.push({ id: terminalId, wire: wireOf(terminalId, terminal.event, terminal.data) });
  sink.write(frames);
}

/** `Last-Event-ID` (header) or `?lastEventId=`: a frame id, 0 when absent. */
export function lastEventId(header: string | string[] | undefined, query: string | undefined): number {
  const raw = (Array.isArray(header) ? header[0] : header) ?? query;
  if (raw === undefined || raw.trim() === '') return 0;
  const n = Number(raw.trim());
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new AppError('VALIDATION_ERROR', 'Last-Event-ID must be a frame id (a non-negative integer)', {
      details: [{ path: '/lastEventId', message: 'must be a non-negative integer' }],
    });
  }
  return n;
}

/**
 * GET …/{id}/stream: attaches to the conversation's latest turn. No turn, or a client that has had
 * the terminal frame already → 204 (which also tells a browser's EventSource to stop reconnecting).
 */
export async function attachToConversation(deps: Deps, userId: string, conversationId: string, after: number, reply: FastifyReply): Promise<void> {
  const { found, reply: latest } = await repo.latestReply(deps.db, userId, conversationId);
  if (!found) throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
  const live = latest?.status === 'streaming';
  // A client holding a dead instance's end (endOfDeadInstance) has had its terminal frame, before the sweep too.
  const end = live ? repo.CRASHED_TERMINAL_ID : latest?.last_frame_id;
  if (latest === undefined || (end != null && after >= end)) {
    await reply.code(204).send();
    return;
  }
  const ended = live ? undefined : latest;
  let first: FirstLook;
  try {
    first = await deps.frames.look(latest.id, after);
  } catch (err) {
    // DESIGN §12 "Under faults": the log's store is unreachable. An ended turn is answered from the
    // database (its stored reply as a snapshot and its terminal frame); a live one cannot be followed.
    if (ended === undefined) {
      reply.log.warn({ err, turnId: latest.id }, 'the frame log is unreachable: attach refused');
      throw new AppError('SERVICE_UNAVAILABLE', 'the stream of this reply cannot be read right now; retry shortly', { headers: { 'Retry-After': '2' } });
    }
    first = { local: false, stored: undefined };
  }
  await serveStream(deps, reply, latest.id, after, ended, first);
}

type ReplyStatus = 'streaming' | statements.TurnEnd['status'];

/** POST …/{id}/stop: 202 when a live turn was told to stop; else 200 with the latest turn's status. */
export async function stopConversationTurn(deps: Deps, userId: string, conversationId: string): Promise<{ code: 200 | 202; status: ReplyStatus | null }> {
  const { found, reply: latest } = await repo.latestReply(deps.db, userId, conversationId);
  if (!found) throw new AppError('CONVERSATION_NOT_FOUND', 'conversation not found');
  if (latest?.status !== 'streaming') return { code: 200, status: (latest?.status as ReplyStatus | undefined) ?? null };
  await deps.frames.requestStop(latest.id);
  return { code: 202, status: 'streaming' };
}
