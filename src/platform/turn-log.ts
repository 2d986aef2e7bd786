import { type FrameBatch, type FrameStore, type WriteOutcome } from './frame-store.ts';
import { isLive } from './liveness.ts';
import { framesAfter, wireOf, type Frame } from './frames.ts';

/** Where a follower's frames go: an SSE connection. */
export interface FrameSink {
  /** Writes frames; false when the connection's buffer is full (the follower then waits for `drained`). */
  write(frames: readonly Frame[]): boolean;
  drained(signal: AbortSignal): Promise<void>;
}

/**
 * How a follow ended: the terminal frame was written (`ended`); the store holds nothing more of a
 * turn known to have ended (`missing`: no log, or a log without its terminal frame — its instance
 * died — the stored reply says the rest); nothing came from a live turn for its liveness window
 * (`silent`: its instance is gone); the follower's signal aborted (`closed`).
 */
export type FollowEnd = 'ended' | 'missing' | 'silent' | 'closed';

export interface FrameLogOptions {
  /** STREAM_LOG_RETENTION_MS: how long a log is kept after its terminal frame. */
  readonly retentionMs: number;
  /** STREAM_LOG_MAX_BYTES: frames beyond a snapshot held per turn; beyond it the log is compacted. */
  readonly maxBytes: number;
  /** STREAM_MAX_DURATION_MS: a live log's expiry is this plus the retention (a crashed turn's log goes away). */
  readonly maxDurationMs: number;
  /** STREAM_HEARTBEAT_MS: a live turn shows it is alive this often; followers elsewhere wait 3 of them. */
  readonly heartbeatMs: number;
  readonly onError: (err: unknown, what: string) => void;
}

/** What the log tells the turn that writes it. */
export interface TurnLogEvents {
  /** Someone asked (from any instance) to stop the turn. */
  stop(): void;
  /** The number of clients attached, on any instance, changed. */
  attached(count: number): void;
}

/**
 * Writes of a running log to the store are at least this far apart (the terminal frame goes at once):
 * a turn costs the store at most 4 writes a second, not one per delta (a provider's chunks come 10 to
 * 50 ms apart), three Redis commands each (the script, its read, its append). A crashed turn's stored
 * reply lacks at most this much of what its clients were sent (DESIGN §12). The turn's own client is
 * served from memory, at once.
 */
const FLUSH_INTERVAL_MS = 250;
/**
 * The interval while someone follows the turn from another instance: the store is what that follower
 * reads, woken by each write's notice, so it sees frames this much later at most.
 */
const FOLLOWED_FLUSH_INTERVAL_MS = 100;
const FLUSH_RETRY_MS = 100;
const FLUSH_RETRY_MAX_MS = 2_000;
/** How long the end of a log keeps being retried while the store is unreachable. */
const FLUSH_GIVE_UP_MS = 30_000;

interface LocalFollower {
  pos: number;
  paused: boolean;
  readonly sink: FrameSink;
  readonly signal: AbortSignal;
  readonly done: (end: FollowEnd) => void;
}

/**
 * The log of a turn this instance runs: appended to synchronously (ids given here), handed at once
 * to the followers attached on this instance, written through to the store one batch at a time
 * (what was appended while a write was out goes in the next one). Beyond the byte cap, the frames
 * held are replaced by a snapshot of the state so far.
 */
export class TurnLog {
  readonly turnId: string;
  readonly events: TurnLogEvents;
  readonly #store: FrameStore;
  readonly #opts: FrameLogOptions;
  readonly #snapshot: () => string;
  readonly #forget: () => void;
  /** Held frames: contiguous ids, the first a snapshot once the log has been compacted. */
  #frames: Frame[] = [];
  #bytes = 0;
  #lastId = 0;
  #endId: number | undefined;
  /** What the store has: frames up to this id. */
  #written = 0;
  /** The store must replace what it holds with this snapshot at the next write. */
  #pendingSnapshot: Frame | undefined;
  #writing: Promise<void> | undefined;
  /** The next write's timer (FLUSH_INTERVAL_MS after the last one started). */
  #waiting: NodeJS.Timeout | undefined;
  #writeStartedAt = Date.now();
  /** Writes were given up (the store unreachable for FLUSH_GIVE_UP_MS): the next frame tries again. */
  #stalled = false;
  readonly #followers = new Set<LocalFollower>();
  /** Clients attached on other instances, with when they were last announced. */
  readonly #remote = new Map<string, number>();
  #attached = 0;
  /** A follower elsewhere attached since the store last sent a notice: it may have read before a write it raced with. */
  #noticeOwed = false;

  constructor(turnId: string, store: FrameStore, opts: FrameLogOptions, snapshot: () => string, events: TurnLogEvents, forget: () => void) {
    this.turnId = turnId;
    this.#store = store;
    this.#opts = opts;
    this.#snapshot = snapshot;
    this.events = events;
    this.#forget = forget;
  }

  /** The id the next frame (the terminal one, when the turn is ending) will get. */
  get nextId(): number {
    return this.#lastId + 1;
  }

  /** Clients attached, on this instance and others. */
  get attached(): number {
    return this.#attached;
  }

  /** Appends a frame; returns its id. */
  append(event: string, data: string): number {
    return this.#append(event, data, false);
  }

  /** Appends the terminal frame: followers end after it; the log is kept for the retention. */
  end(event: string, data: string): number {
    return this.#append(event, data, true);
  }

  #append(event: string, data: string, terminal: boolean): number {
    if (this.#endId !== undefined) throw new Error('the log of this turn has ended');
    const id = ++this.#lastId;
    if (terminal) this.#endId = id;
    const frame = { id, wire: wireOf(id, event, data) };
    this.#stalled = false;
    this.#frames.push(frame);
    this.#bytes += frame.wire.length;
    // Followers keeping up get every frame; only one left behind by a compaction gets the snapshot.
    for (const f of this.#followers) this.#deliver(f);
    if (this.#bytes > this.#opts.maxBytes && !terminal) this.#compact();
    // The terminal frame does not wait for the write interval.
    if (terminal && this.#waiting !== undefined) {
      clearTimeout(this.#waiting);
      this.#waiting = undefined;
    }
    this.#flush();
    return id;
  }

  /**
   * A sign of life for followers on other instances (none is sent when there are none); clients
   * announced elsewhere that stopped announcing are dropped.
   */
  alive(): void {
    const now = Date.now();
    for (const [id, at] of this.#remote) if (!isLive(at, now, this.#opts.heartbeatMs)) this.#remote.delete(id);
    this.#recount();
    if (this.#remote.size > 0) this.#notify('telling followers the turn is alive');
  }

  /**
   * A client on another instance attached (or left). One not known yet may have read the store just
   * before a write that sent no notice (nobody followed then): the store gets what is held at once,
   * with a notice — or, when it holds everything, a bare notice — so that follower looks again.
   */
  remote(followerId: string, attached: boolean): void {
    const known = this.#remote.has(followerId);
    if (attached) this.#remote.set(followerId, Date.now());
    else this.#remote.delete(followerId);
    this.#recount();
    if (!attached || known) return;
    this.#noticeOwed = true;
    // A write out now is followed by one carrying the notice, or by a bare notice (#flush's end).
    if (this.#writing !== undefined || this.#stalled) return;
    if (this.#written >= this.#lastId) return this.#notify('telling a follower to look again');
    clearTimeout(this.#waiting);
    this.#waiting = undefined;
    this.#flush();
  }

  /** A notice to the turn's watchers elsewhere (after every write sent so far was answered, so it follows them). */
  #notify(what: string): void {
    this.#noticeOwed = false;
    this.#store.notify(this.turnId).catch((err: unknown) => this.#opts.onError(err, what));
  }

  follow(after: number, sink: FrameSink, signal: AbortSignal): Promise<FollowEnd> {
    return new Promise((resolve) => {
      const f: LocalFollower = {
        pos: after,
        paused: false,
        sink,
        signal,
        done: (end) => {
          if (!this.#followers.delete(f)) return;
          signal.removeEventListener('abort', onAbort);
          this.#recount();
          resolve(end);
        },
      };
      const onAbort = (): void => f.done('closed');
      if (signal.aborted) return resolve('closed');
      signal.addEventListener('abort', onAbort, { once: true });
      this.#followers.add(f);
      this.#recount();
      this.#deliver(f);
    });
  }

  #recount(): void {
    const n = this.#followers.size + this.#remote.size;
    if (n === this.#attached) return;
    this.#attached = n;
    if (this.#endId === undefined) this.events.attached(n);
  }

  #deliver(f: LocalFollower): void {
    if (f.paused) return;
    const frames = this.#after(f.pos);
    const last = frames.at(-1);
    if (last !== undefined) {
      f.pos = last.id;
      if (!f.sink.write(frames)) {
        f.paused = true;
        void f.sink.drained(f.signal).then(() => {
          f.paused = false;
          if (!f.signal.aborted) this.#deliver(f);
        });
        return;
      }
    }
    if (this.#endId !== undefined && f.pos >= this.#endId) f.done('ended');
  }

  /** Held frames after `pos` (from the snapshot when `pos` is older than it). */
  #after(pos: number): Frame[] {
    return pos >= this.#lastId ? [] : framesAfter(this.#frames, pos);
  }

  #compact(): void {
    const snap = { id: this.#lastId, wire: wireOf(this.#lastId, 'snapshot', this.#snapshot()) };
    this.#frames = [snap];
    this.#bytes = 0;
    this.#pendingSnapshot = snap;
  }

  /**
   * One write to the store at a time, FLUSH_INTERVAL_MS apart (FOLLOWED_FLUSH_INTERVAL_MS while
   * followed from elsewhere; counting from the log's opening, so a turn shorter than that is one
   * write); the next carries everything appended meanwhile. The terminal frame, and frames a new
   * follower elsewhere is owed a notice of, go at once.
   */
  #flush(): void {
    if (this.#writing !== undefined || this.#waiting !== undefined || this.#stalled) return;
    const interval = this.#remote.size > 0 ? FOLLOWED_FLUSH_INTERVAL_MS : FLUSH_INTERVAL_MS;
    const wait = this.#endId !== undefined || this.#noticeOwed ? 0 : this.#writeStartedAt + interval - Date.now();
    if (wait > 0) {
      this.#waiting = setTimeout(() => {
        this.#waiting = undefined;
        this.#flush();
      }, wait);
      return;
    }
    this.#writeStartedAt = Date.now();
    this.#writing = this.#writeAll().finally(() => {
      this.#writing = undefined;
      if (this.#written < this.#lastId && !this.#stalled) return this.#flush();
      if (this.#noticeOwed && !this.#stalled) this.#notify('telling a follower to look again');
      if (this.#endId !== undefined) this.#forget();
    });
  }

  /**
   * Writes until the store holds every frame appended. A batch is fixed once formed and sent again,
   * unchanged, until the store has answered it: a write that timed out may still land (a frozen
   * store runs what it read when it wakes), and the store refuses the ids it then already holds
   * (`held`), so no frame is ever stored twice. A store that lost the log (`lost`) is sent a snapshot
   * of the reply so far with the frames after it. After FLUSH_GIVE_UP_MS of failures the log stalls
   * until its next frame (an ended turn's log is let go: its followers read the stored reply).
   */
  async #writeAll(): Promise<void> {
    const giveUpAt = Date.now() + FLUSH_GIVE_UP_MS;
    let batch: FrameBatch | undefined;
    for (let wait = FLUSH_RETRY_MS; this.#written < this.#lastId;) {
      batch ??= this.#nextBatch();
      try {
        // Notices only while someone follows the turn from another instance (nobody else listens), and
        // with the terminal frame: a follower whose attach arrives after the log was let go hears that.
        const notify = this.#remote.size > 0 || batch.end;
        const ttlMs = batch.end ? this.#opts.retentionMs : this.#opts.maxDurationMs + this.#opts.retentionMs;
        const outcome = await this.#store.write(this.turnId, batch, ttlMs, notify);
        if (notify && outcome.kind === 'written') this.#noticeOwed = false;
        this.#acknowledge(batch, outcome);
        batch = undefined;
        wait = FLUSH_RETRY_MS;
      } catch (err) {
        if (Date.now() + wait > giveUpAt) {
          this.#opts.onError(err, 'writing a frame log');
          this.#stalled = true;
          return;
        }
        await new Promise((r) => setTimeout(r, wait));
        wait = Math.min(wait * 2, FLUSH_RETRY_MAX_MS);
      }
    }
  }

  /** The frames the store does not hold yet, after the snapshot that must replace what it holds, if any. */
  #nextBatch(): FrameBatch {
    const snapshot = this.#pendingSnapshot;
    const frames = this.#after(snapshot?.id ?? this.#written);
    const last = frames.at(-1)?.id ?? snapshot?.id;
    return { after: this.#written, ...(snapshot ? { snapshot } : {}), frames, end: this.#endId !== undefined && last === this.#endId };
  }

  #acknowledge(batch: FrameBatch, outcome: WriteOutcome): void {
    if (outcome.kind === 'lost') {
      // The reply so far stands for every frame before the unwritten ones (the terminal frame stays a frame of its own).
      const id = this.#endId !== undefined ? this.#endId - 1 : this.#lastId;
      this.#pendingSnapshot = { id, wire: wireOf(id, 'snapshot', this.#snapshot()) };
      return;
    }
    if (this.#pendingSnapshot === batch.snapshot) this.#pendingSnapshot = undefined;
    const last = batch.frames.at(-1)?.id ?? batch.snapshot?.id ?? batch.after;
    this.#written = Math.max(this.#written, outcome.kind === 'written' ? last : outcome.top);
  }
}
