import { randomToken } from './ids.ts';
import { isLive } from './liveness.ts';
import { type ControlMessage, type FrameStore, type StoredFrames } from './frame-store.ts';
import type { Frame } from './frames.ts';
import { TurnLog, type FollowEnd, type FrameLogOptions, type FrameSink, type TurnLogEvents } from './turn-log.ts';

// The follower's side, declared with the per-turn log that serves it; FrameLog is their public face.
export type { FollowEnd, FrameLogOptions, FrameSink } from './turn-log.ts';

// DESIGN §12: every frame of a live turn goes through the turn's frame log, shared by all instances;
// every client — the turn's own included — reads the log as an attached follower.

/** How soon a follower reads the store again after a read failed. */
const READ_RETRY_MS = 250;

/** A client's first look at a turn (FrameLog.look). */
export type FirstLook = { readonly local: true } | StoredLook;
type StoredLook = { readonly local: false; readonly stored: StoredFrames | undefined };

/**
 * The frame logs of one instance: the logs of the turns it runs (held here while they run, written
 * through to the store), and followers reading any turn's log — from memory when the turn runs here,
 * else from the store, woken by its notices.
 */
export class FrameLog {
  readonly #store: FrameStore;
  readonly #opts: FrameLogOptions;
  readonly #running = new Map<string, TurnLog>();

  constructor(store: FrameStore, opts: FrameLogOptions) {
    this.#store = store;
    this.#opts = opts;
    store.onControl((m) => this.#control(m));
  }

  /** Starts the log of a turn this instance runs. `snapshot` is the state so far (a snapshot frame's data). */
  open(turnId: string, snapshot: () => string, events: TurnLogEvents): TurnLog {
    const log = new TurnLog(turnId, this.#store, this.#opts, snapshot, events, () => this.#running.delete(turnId));
    this.#running.set(turnId, log);
    return log;
  }

  /** Resolves once this instance hears control messages and notices (or after `timeoutMs`, the store being down). */
  async ready(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([this.#store.ready().catch((err: unknown) => this.#opts.onError(err, 'listening for frame-log notices')), late]);
    clearTimeout(timer);
  }

  /**
   * A client's first look at a turn's log, before it is answered: where the turn runs here, nothing
   * to read; else what the store holds after `after`. Throws when the store cannot be read (the
   * caller answers 503, or the stored reply of an ended turn: DESIGN §12 "Under faults").
   */
  async look(turnId: string, after: number): Promise<FirstLook> {
    if (this.#running.has(turnId)) return { local: true };
    return { local: false, stored: await this.#store.read(turnId, after) };
  }

  /**
   * Sends the frames of a turn after `after` to `sink`, then follows live until the terminal frame.
   * `live`: the turn was running when the caller looked (a log not there yet is waited for); `first`:
   * the caller's `look`, when it took one.
   */
  follow(
    turnId: string,
    after: number,
    sink: FrameSink,
    opts: { readonly live: boolean; readonly signal: AbortSignal; readonly first?: FirstLook },
  ): Promise<FollowEnd> {
    const local = this.#running.get(turnId);
    if (local !== undefined) return local.follow(after, sink, opts.signal);
    const first = opts.first?.local === false ? opts.first : undefined;
    return this.#followStored(turnId, after, sink, opts.live, opts.signal, first);
  }

  /** Every frame a turn's log holds (a snapshot first when it was compacted); undefined: no log. Throws when the store cannot be read. */
  async held(turnId: string): Promise<readonly Frame[] | undefined> {
    return (await this.#store.read(turnId, 0))?.frames;
  }

  /** Asks the instance running the turn to stop it (this one directly, others through the store). */
  async requestStop(turnId: string): Promise<void> {
    const local = this.#running.get(turnId);
    if (local !== undefined) local.events.stop();
    else await this.#store.publish({ kind: 'stop', turnId });
  }

  async close(): Promise<void> {
    await this.#store.close();
  }

  #control(m: ControlMessage): void {
    const log = this.#running.get(m.turnId);
    if (log === undefined) return;
    if (m.kind === 'stop') log.events.stop();
    else log.remote(m.followerId, m.kind === 'attach');
  }

  async #followStored(turnId: string, after: number, sink: FrameSink, live: boolean, signal: AbortSignal, first?: StoredLook): Promise<FollowEnd> {
    const store = this.#store;
    if (!live) {
      // An ended turn's log changes no more: what it holds is sent, and the stored reply says the rest.
      const stored = first !== undefined ? first.stored : await store.read(turnId, after);
      const frames = stored?.frames ?? [];
      if (frames.length > 0 && !sink.write(frames)) await sink.drained(signal);
      return stored?.ended === true ? 'ended' : 'missing';
    }
    const { heartbeatMs } = this.#opts;
    const followerId = randomToken(8);
    let woken: (() => void) | undefined;
    let heard = Date.now();
    const wake = (): void => {
      heard = Date.now();
      woken?.();
    };
    const unwatch = await store.watch(turnId, wake);
    // Announced now and every heartbeat: the running instance counts this client as attached (detach grace)
    // and, while it does, sends its writes' notices and signs of life; hearing of it, it writes at once with a
    // notice, so a write that raced this client's first read (and sent none) reaches it (TurnLog.remote).
    const announce = (kind: 'attach' | 'detach'): void =>
      void store.publish({ kind, turnId, followerId }).catch((err: unknown) => this.#opts.onError(err, 'announcing a follower'));
    announce('attach');
    const beat = setInterval(() => announce('attach'), heartbeatMs);
    let pos = after;
    let pending: StoredLook | undefined = first;
    /** Since when reads of the store have failed (a hiccup is ridden out; an outage past the liveness window ends the follow). */
    let failingSince: number | undefined;
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    try {
      for (;;) {
        if (signal.aborted) return 'closed';
        const woke = new Promise<void>((resolve) => (woken = resolve));
        let stored: StoredFrames | undefined;
        let readable = true;
        try {
          stored = pending !== undefined ? pending.stored : await store.read(turnId, pos);
          failingSince = undefined;
        } catch (err) {
          failingSince ??= Date.now();
          if (!isLive(failingSince, Date.now(), heartbeatMs)) throw err;
          readable = false;
        }
        pending = undefined;
        if (readable) {
          // No log yet (or its store restarted empty): the running turn's next write brings it.
          const last = stored?.frames.at(-1);
          if (stored !== undefined && last !== undefined) {
            pos = last.id;
            heard = Date.now();
            if (!sink.write(stored.frames)) await sink.drained(signal);
          }
          if (stored?.ended === true) return 'ended';
        }
        // A notice, or a look at the store every heartbeat (a notice can be lost; a failed read is tried again sooner); silent past the liveness window.
        let tick: NodeJS.Timeout | undefined;
        const nextLookMs = readable ? heartbeatMs : Math.min(heartbeatMs, READ_RETRY_MS);
        await Promise.race([woke, aborted, new Promise<void>((resolve) => (tick = setTimeout(resolve, nextLookMs)))]);
        clearTimeout(tick);
        if (readable && !isLive(heard, Date.now(), heartbeatMs)) {
          // One last look before giving up on it.
          const again = await store.read(turnId, pos);
          if (again === undefined || again.frames.length === 0) return 'silent';
          pending = { local: false, stored: again };
        }
      }
    } finally {
      clearInterval(beat);
      unwatch();
      announce('detach');
    }
  }
}
