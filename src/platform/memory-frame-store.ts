import { framesAfter, type Frame } from './frames.ts';
import { judgeWrite, Notices, setsExpiry, type FrameStore, type StoredFrames } from './frame-store.ts';
import type { Clock } from './clock.ts';

interface Held {
  frames: Frame[];
  bytes: number;
  ended: boolean;
  expiresAtMs: number;
}

/** What the logs of ended turns may hold together in this process before the oldest are let go. */
const MEMORY_ENDED_LOGS_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Frame logs in this process: the embedded single-instance default. Expiry is read from the clock.
 * The logs of ended turns are kept for the retention but within MEMORY_ENDED_LOGS_MAX_BYTES in all,
 * the oldest let go first (a resume then gets the stored reply as a snapshot): a busy process must
 * not hold ten minutes of every reply.
 */
export function createMemoryFrameStore(clock: Clock, onError: (err: unknown) => void, endedMaxBytes = MEMORY_ENDED_LOGS_MAX_BYTES): FrameStore {
  const logs = new Map<string, Held>();
  /** Ended logs, oldest ending first. */
  const ended = new Map<string, Held>();
  let endedBytes = 0;
  const notices = new Notices(onError);
  let sweep: NodeJS.Timeout | undefined;

  const live = (turnId: string): Held | undefined => {
    const held = logs.get(turnId);
    if (held !== undefined && held.expiresAtMs <= clock.now().getTime()) {
      drop(turnId, held);
      return undefined;
    }
    return held;
  };
  const drop = (turnId: string, held: Held): void => {
    logs.delete(turnId);
    if (ended.delete(turnId)) endedBytes -= held.bytes;
  };
  // Expired logs go away even when nobody reads them again.
  const sweepExpired = (): void => {
    const now = clock.now().getTime();
    for (const [id, held] of logs) if (held.expiresAtMs <= now) drop(id, held);
    if (logs.size === 0) {
      clearInterval(sweep);
      sweep = undefined;
    }
  };

  return {
    async write(turnId, batch, ttlMs, notify) {
      let held = live(turnId);
      const top = held?.frames.at(-1)?.id ?? 0;
      const outcome = judgeWrite(batch, top);
      if (outcome.kind !== 'written') return outcome;
      if (held === undefined) {
        held = { frames: [], bytes: 0, ended: false, expiresAtMs: 0 };
        logs.set(turnId, held);
        sweep ??= setInterval(sweepExpired, 60_000).unref();
      }
      if (batch.snapshot) {
        held.frames = [batch.snapshot];
        held.bytes = batch.snapshot.wire.length;
      }
      for (const f of batch.frames) {
        held.frames.push(f);
        held.bytes += f.wire.length;
      }
      if (setsExpiry(batch, top)) held.expiresAtMs = clock.now().getTime() + ttlMs;
      if (batch.end && !held.ended) {
        held.ended = true;
        ended.set(turnId, held);
        endedBytes += held.bytes;
        for (const [id, old] of ended) {
          if (endedBytes <= endedMaxBytes || old === held) break;
          drop(id, old);
        }
      }
      if (notify) notices.notice(turnId);
      return outcome;
    },
    async read(turnId, after): Promise<StoredFrames | undefined> {
      const held = live(turnId);
      if (held === undefined) return undefined;
      return { frames: framesAfter(held.frames, after), ended: held.ended };
    },
    async watch(turnId, wake) {
      const watching = notices.watch(turnId, wake);
      return () => void watching.unwatch();
    },
    async notify(turnId) {
      notices.notice(turnId);
    },
    async publish(message) {
      notices.control(message);
    },
    onControl: (handler) => notices.onControl(handler),
    ready: async () => undefined,
    async close() {
      clearInterval(sweep);
      logs.clear();
      ended.clear();
      endedBytes = 0;
      notices.clear();
    },
  };
}
