// What one app's advisor streams share: built once per app by deps.ts (never module state, so tests
// and a second app in one process each have their own, with their own settings).
import type { FastifyRequest } from 'fastify';
import type { SseWriter } from '../../http/sse.ts';
import { Ticker } from '../../platform/ticker.ts';

/** A crashed instance's lease frees itself within this; a live turn renews it every third of it. */
export const LEASE_TTL_MS = 30_000;

/** The periodic work of a live turn. */
export interface Ticking {
  /** A sign of life for clients following the turn from other instances. */
  beat(): void;
  renewLease(): Promise<void>;
  /** The reservation's sign of life (DESIGN §10: the sweeper never takes a live turn). */
  markAlive(): Promise<void>;
}

/** One timer per kind of periodic work, however many streams are open. */
export class StreamRuntime {
  /** The keep-alive comment of every open stream connection; a backed-up socket gets none (it must not grow). */
  readonly pings: Ticker<SseWriter>;
  /** Every live turn's sign of life for followers elsewhere, and its reservation's. */
  readonly heartbeat: Ticker<Ticking>;
  /** Every live turn's lease renewal. */
  readonly renewal: Ticker<Ticking>;
  /** Each stream request's rate-limit verdict, asked for at admission and awaited by the turn. */
  readonly verdicts = new WeakMap<FastifyRequest, Promise<void>>();

  constructor(heartbeatMs: number) {
    this.pings = new Ticker(heartbeatMs, (sse) => void (sse.needsDrain || sse.comment('ping')));
    this.heartbeat = new Ticker(heartbeatMs, (live) => {
      live.beat();
      void live.markAlive();
    });
    this.renewal = new Ticker(LEASE_TTL_MS / 3, (live) => void live.renewLease());
  }

  /** The verdict taken for this request at admission (none taken: admitted). */
  verdictOf(req: FastifyRequest): Promise<void> {
    return this.verdicts.get(req) ?? Promise.resolve();
  }
}
