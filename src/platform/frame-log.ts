import { randomToken } from './ids.ts';

// DESIGN §12: every frame of a live turn goes through the turn's frame log, shared by all instances;
// every client — the turn's own included — reads the log as an attached follower.

/** One frame of a turn's stream: its id and its text as the wire carries it. */
export interface Frame {
  readonly id: number;
  readonly wire: string;
}

/** The SSE text of a frame (`data` is one line: JSON.stringify output is). */
export const wireOf = (id: number, event: string, data: string): string => `id: ${id}\nevent: ${event}\ndata: ${data}\n\n`;

/** The frames of a log (contiguous ids) after `after`: from its snapshot when `after` is older than it. */
export function framesAfter(frames: readonly Frame[], after: number): Frame[] {
  const first = frames[0];
  return first === undefined ? [] : frames.slice(Math.max(0, after + 1 - first.id));
}

/** A batch of frames as one text (how the shared stores keep a write). */
export const batchWire = (frames: readonly Frame[]): string => frames.map((f) => f.wire).join('');

/**
 * Appends to `out` the frames of a batch's text whose ids are above `after` and above every frame
 * already in `out` (each frame ends with a blank line; a data line never holds one): what a store
 * hands out never repeats an id or goes back, whatever its entries overlap.
 */
export function framesOf(wire: string, after: number, out: Frame[] = []): Frame[] {
  let floor = Math.max(after, out.at(-1)?.id ?? 0);
  for (let at = 0; at < wire.length; ) {
    const end = wire.indexOf('\n\n', at);
    const stop = end < 0 ? wire.length : end + 2;
    const text = wire.slice(at, stop);
    // Every frame starts `id: <n>\n`.
    const id = Number.parseInt(text.slice(4), 10);
    if (id > floor) {
      out.push({ id, wire: text });
      floor = id;
    }
    at = stop;
  }
  return out;
}

/** What a store holds of a turn's log after a frame id. */
export interface StoredFrames {
  /** In order, ids above the one asked after; a snapshot frame first when that id is older than it. */
  readonly frames: readonly Frame[];
  /** The terminal frame is among what the store holds. */
  readonly ended: boolean;
}

/** A write of a turn's log: the frames after what was written, and the snapshot that replaces what came before. */
export interface FrameBatch {
  /** The last frame id the writer knows the store holds (0: none); the frames follow it. */
  readonly after: number;
  /** Replaces every frame up to its id (the log outgrew its byte cap, or the store lost it). */
  readonly snapshot?: Frame;
  readonly frames: readonly Frame[];
  /** The last frame of `frames` is the terminal one: retention starts. */
  readonly end: boolean;
}

/**
 * What a store did with a batch (DESIGN §12 "Under faults"). `written`: appended. `held`: refused,
 * the log already holds an id of it (a retried or late write), up to `top`. `lost`: refused, the
 * log does not end at the batch's `after` (its store restarted empty, or a write was given up): only
 * a batch that starts with a snapshot is taken then, so a reader never meets a silent gap.
 */
export type WriteOutcome = { readonly kind: 'written' } | { readonly kind: 'held'; readonly top: number } | { readonly kind: 'lost' };

/** The first id of a batch: its snapshot's, else its first frame's. */
export const firstIdOf = (batch: FrameBatch): number => batch.snapshot?.id ?? batch.frames[0]?.id ?? batch.after + 1;

/** The one rule every store applies to a write, given the highest frame id its log holds (0: no log). */
export function judgeWrite(batch: FrameBatch, top: number): WriteOutcome {
  if (top >= firstIdOf(batch)) return { kind: 'held', top };
  if (batch.snapshot === undefined && top !== batch.after) return { kind: 'lost' };
  return { kind: 'written' };
}

/** What instances tell each other about turns: stop one; a client attached to (or left) one from elsewhere. */
export type ControlMessage =
  | { readonly kind: 'stop'; readonly turnId: string }
  | { readonly kind: 'attach' | 'detach'; readonly turnId: string; readonly followerId: string };

/**
 * Where turns' frame logs are kept so every instance can read them, and how instances reach each
 * other: Redis (a stream per turn, pub/sub), PostgreSQL (a table, LISTEN/NOTIFY) or this process.
 * A shared store keeps each write as one entry (its frames' text, under the id of its last frame),
 * so "the frames after id n" is the entries above n, less the frames up to n.
 */
export interface FrameStore {
  /**
   * Writes a batch (one round trip, atomically with `judgeWrite`'s verdict on it) and tells the
   * turn's watchers; a refused batch writes nothing.
   */
  write(turnId: string, batch: FrameBatch, ttlMs: number): Promise<WriteOutcome>;
  /** The frames after `after` (a snapshot first when `after` is older than what is held); undefined: no log. */
  read(turnId: string, after: number): Promise<StoredFrames | undefined>;
  /** Calls `wake` on every write to the turn's log and every sign of life of it; resolves once listening. */
  watch(turnId: string, wake: () => void): Promise<() => void>;
  /** A sign of life of a running turn, for watchers on other instances. */
  alive(turnId: string): Promise<void>;
  publish(message: ControlMessage): Promise<void>;
  /** The instance's one handler of control messages (its own included). */
  onControl(handler: (message: ControlMessage) => void): void;
  /** Resolves once control messages and notices are being received. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

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

/** What the log tells the turn that writes it. */
export interface TurnLogEvents {
  /** Someone asked (from any instance) to stop the turn. */
  stop(): void;
  /** The number of clients attached, on any instance, changed. */
  attached(count: number): void;
}

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

/**
 * Writes of a running log to the store are at least this far apart (the terminal frame goes at once):
 * a fast provider costs the store a few dozen writes a second, not one per delta; a follower on another
 * instance sees frames this much later at most.
 */
const FLUSH_INTERVAL_MS = 20;
const FLUSH_RETRY_MS = 100;
const FLUSH_RETRY_MAX_MS = 2_000;
/** How long the end of a log keeps being retried while the store is unreachable. */
const FLUSH_GIVE_UP_MS = 30_000;
/** A turn silent (no frame, no sign of life) for this many heartbeats is taken for one whose instance is gone. */
export const LIVENESS_BEATS = 3;
/** How soon a follower reads the store again after a read failed. */
const READ_RETRY_MS = 250;

/** A client's first look at a turn (FrameLog.look). */
export type FirstLook = { readonly local: true } | StoredLook;
type StoredLook = { readonly local: false; readonly stored: StoredFrames | undefined };

/**
 * What an instance hears, handed on: a turn's notices to whoever watches that turn, control messages
 * to the instance's frame log. Each store keeps one.
 */
export class Notices {
  readonly #watchers = new Map<string, Set<() => void>>();
  readonly #onError: (err: unknown) => void;
  #control: (m: ControlMessage) => void = () => undefined;

  constructor(onError: (err: unknown) => void) {
    this.#onError = onError;
  }

  onControl(handler: (m: ControlMessage) => void): void {
    this.#control = handler;
  }

  /** A control message (as JSON text when it came from another instance). */
  control(message: ControlMessage | string): void {
    try {
      this.#control(typeof message === 'string' ? (JSON.parse(message) as ControlMessage) : message);
    } catch (err) {
      this.#onError(err);
    }
  }

  notice(key: string): void {
    for (const wake of this.#watchers.get(key) ?? []) wake();
  }

  /** Adds a watcher of `key`: `first` when nobody watched it; `unwatch` returns true for the last one. */
  watch(key: string, wake: () => void): { first: boolean; unwatch: () => boolean } {
    let set = this.#watchers.get(key);
    const first = set === undefined;
    if (set === undefined) this.#watchers.set(key, (set = new Set()));
    set.add(wake);
    const watching = set;
    return {
      first,
      unwatch: () => {
        watching.delete(wake);
        if (watching.size > 0 || this.#watchers.get(key) !== watching) return false;
        this.#watchers.delete(key);
        return true;
      },
    };
  }

  clear(): void {
    this.#watchers.clear();
  }
}

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
  follow(turnId: string, after: number, sink: FrameSink, opts: { readonly live: boolean; readonly signal: AbortSignal; readonly first?: FirstLook }): Promise<FollowEnd> {
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
    const silentMs = LIVENESS_BEATS * heartbeatMs;
    const followerId = randomToken(8);
    let woken: (() => void) | undefined;
    let heard = Date.now();
    const wake = (): void => {
      heard = Date.now();
      woken?.();
    };
    const unwatch = await store.watch(turnId, wake);
    // Announced now and every heartbeat: the running instance counts this client as attached (detach grace).
    const announce = (kind: 'attach' | 'detach'): void => void store.publish({ kind, turnId, followerId }).catch((err: unknown) => this.#opts.onError(err, 'announcing a follower'));
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
          if (Date.now() - failingSince > silentMs) throw err;
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
        if (readable && Date.now() - heard > silentMs) {
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

  /** A sign of life for followers on other instances; clients announced elsewhere that stopped announcing are dropped. */
  alive(): void {
    const stale = Date.now() - LIVENESS_BEATS * this.#opts.heartbeatMs;
    for (const [id, at] of this.#remote) if (at < stale) this.#remote.delete(id);
    this.#recount();
    this.#store.alive(this.turnId).catch((err: unknown) => this.#opts.onError(err, 'telling followers the turn is alive'));
  }

  /** A client on another instance attached (or left). */
  remote(followerId: string, attached: boolean): void {
    if (attached) this.#remote.set(followerId, Date.now());
    else this.#remote.delete(followerId);
    this.#recount();
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
   * One write to the store at a time, FLUSH_INTERVAL_MS apart (counting from the log's opening, so a
   * turn shorter than that is one write); the next carries everything appended meanwhile.
   */
  #flush(): void {
    if (this.#writing !== undefined || this.#waiting !== undefined || this.#stalled) return;
    const wait = this.#endId !== undefined ? 0 : this.#writeStartedAt + FLUSH_INTERVAL_MS - Date.now();
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
      if (this.#written < this.#lastId && !this.#stalled) this.#flush();
      else if (this.#endId !== undefined) this.#forget();
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
    for (let wait = FLUSH_RETRY_MS; this.#written < this.#lastId; ) {
      batch ??= this.#nextBatch();
      try {
        const outcome = await this.#store.write(this.turnId, batch, batch.end ? this.#opts.retentionMs : this.#opts.maxDurationMs + this.#opts.retentionMs);
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
