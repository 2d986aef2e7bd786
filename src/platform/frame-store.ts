import type { Frame } from './frames.ts';

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

/**
 * A write sets the log's expiry (the ttl from now) only when it creates the log (the first write, or
 * one after the log was lost), replaces it (a snapshot) or ends it (retention starts): the expiry a
 * live log gets at creation (STREAM_MAX_DURATION_MS + the retention) outlasts the turn.
 */
export const setsExpiry = (batch: FrameBatch, top: number): boolean => top === 0 || batch.snapshot !== undefined || batch.end;

/** The one rule every store applies to a write, given the highest frame id its log holds (0: no log). */
export function judgeWrite(batch: FrameBatch, top: number): WriteOutcome {
  if (top >= firstIdOf(batch)) return { kind: 'held', top };
  if (batch.snapshot === undefined && top !== batch.after) return { kind: 'lost' };
  return { kind: 'written' };
}

/** What instances tell each other about turns: stop one; a client attached to (or left) one from elsewhere. */
export type ControlMessage =
  { readonly kind: 'stop'; readonly turnId: string } | { readonly kind: 'attach' | 'detach'; readonly turnId: string; readonly followerId: string };

/**
 * Where turns' frame logs are kept so every instance can read them, and how instances reach each
 * other: Redis (a stream per turn, pub/sub), PostgreSQL (a table, LISTEN/NOTIFY) or this process.
 * A shared store keeps each write as one entry (its frames' text, under the id of its last frame),
 * so "the frames after id n" is the entries above n, less the frames up to n.
 */
export interface FrameStore {
  /**
   * Writes a batch (one round trip, atomically with `judgeWrite`'s verdict on it; the expiry as
   * `setsExpiry` says) and, when `notify` (someone follows the turn from another instance), tells the
   * turn's watchers; a refused batch writes nothing.
   */
  write(turnId: string, batch: FrameBatch, ttlMs: number, notify: boolean): Promise<WriteOutcome>;
  /** The frames after `after` (a snapshot first when `after` is older than what is held); undefined: no log. */
  read(turnId: string, after: number): Promise<StoredFrames | undefined>;
  /** Calls `wake` on every notice of the turn (a write, `notify`); resolves once listening. */
  watch(turnId: string, wake: () => void): Promise<() => void>;
  /** A notice to the turn's watchers on other instances: a sign of life of it, or "look again" (a write they may have missed). */
  notify(turnId: string): Promise<void>;
  publish(message: ControlMessage): Promise<void>;
  /** The instance's one handler of control messages (its own included). */
  onControl(handler: (message: ControlMessage) => void): void;
  /** Resolves once control messages and notices are being received. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

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
