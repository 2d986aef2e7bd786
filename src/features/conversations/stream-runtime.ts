// What one app's advisor streams share: built once per app by deps.ts (never module state, so tests
// and a second app in one process each have their own, with their own settings).
import type { SseWriter } from '../../http/sse.ts';
import { Ticker } from '../../platform/ticker.ts';
import type { TurnStart } from './turn-statements.ts';

/** A crashed instance's lease frees itself within this; a live turn renews it every third of it. */
export const LEASE_TTL_MS = 30_000;

/** The periodic work of a live turn. */
export interface Ticking {
  /** A sign of life for clients following the turn from other instances. */
  beat(): void;
  renewLease(): Promise<void>;
  /** The turn whose reservation shows a sign of life with every heartbeat (DESIGN §10: the sweeper never takes a live turn). */
  readonly turnId: string;
}

/** What the heartbeat does once for many live turns. */
export interface Heartbeats {
  /** Marks these turns' reservations alive, in one statement. */
  markAlive(turnIds: readonly string[]): Promise<void>;
  onError(err: unknown): void;
}

/** How many users' provider keys an instance remembers as it last read them (their sealed bytes only: never a key in the clear). */
const KNOWN_KEYS = 10_000;

/** What a turn's start statement is told of the user's provider key (statements.TurnStart `key`). */
type KnownKey = NonNullable<TurnStart['key']>;

/** The provider keys this instance last read, by user, least recently used first out. */
class KnownKeys {
  readonly #keys = new Map<string, KnownKey>();

  get(userId: string): KnownKey | undefined {
    const key = this.#keys.get(userId);
    if (key !== undefined) {
      this.#keys.delete(userId);
      this.#keys.set(userId, key);
    }
    return key;
  }

  set(userId: string, key: KnownKey): void {
    this.#keys.delete(userId);
    this.#keys.set(userId, key);
    if (this.#keys.size > KNOWN_KEYS) this.#keys.delete(this.#keys.keys().next().value ?? '');
  }

  delete(userId: string): void {
    this.#keys.delete(userId);
  }
}

/** One timer per kind of periodic work, however many streams are open. */
export class StreamRuntime {
  /** The keep-alive comment of every open stream connection; a backed-up socket gets none (it must not grow). */
  readonly pings: Ticker<SseWriter>;
  /** Every live turn's sign of life for followers elsewhere, and (together, per tick) its reservation's. */
  readonly heartbeat: Ticker<Ticking>;
  /** Every live turn's lease renewal. */
  readonly renewal: Ticker<Ticking>;
  /** The users' provider keys as last read, so a turn’s start needs no read of its own (start.ts). */
  readonly knownKeys = new KnownKeys();

  constructor(heartbeatMs: number, beats: Heartbeats) {
    this.pings = new Ticker(heartbeatMs, (sse) => void (sse.needsDrain || sse.comment('ping')));
    // The reservations of a tick's turns are marked together: one statement per tick, however many turns run.
    this.heartbeat = new Ticker(
      heartbeatMs,
      (live) => live.beat(),
      (lives) => void beats.markAlive(lives.map((l) => l.turnId)).catch((err: unknown) => beats.onError(err)),
    );
    this.renewal = new Ticker(LEASE_TTL_MS / 3, (live) => void live.renewLease());
  }
}
