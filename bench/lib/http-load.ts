// HTTP load over an undici Pool of N keep-alive connections, for a fixed time: closed loop (N workers,
// each sending its next request when the previous one answered) or paced (N workers whose requests
// arrive at a given total rate, at random).
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

export interface Timed {
  readonly status: number;
  readonly ms: number;
  readonly body: string;
}

export class HttpLoad {
  readonly #pool: Pool;

  constructor(origin: string, connections: number) {
    this.#pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  }

  /** One GET; the body is read whole (the time includes it). */
  async get(path: string, headers: Record<string, string>, keepBody = false): Promise<Timed> {
    const started = performance.now();
    const res = await this.#pool.request({ path, method: 'GET', headers });
    let body = '';
    if (keepBody || res.statusCode !== 200) body = await res.body.text();
    else await res.body.dump({ limit: Number.MAX_SAFE_INTEGER });
    return { status: res.statusCode, ms: performance.now() - started, body };
  }

  /** Runs `iteration` in `workers` parallel loops until `durationMs` has passed; returns iterations done. */
  async run(workers: number, durationMs: number, iteration: (worker: number) => Promise<void>): Promise<{ iterations: number; wallMs: number }> {
    const started = performance.now();
    const until = started + durationMs;
    let iterations = 0;
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        while (performance.now() < until) {
          await iteration(w);
          iterations++;
        }
      }),
    );
    return { iterations, wallMs: performance.now() - started };
  }

  /**
   * Runs `iteration` in `workers` loops whose starts arrive at `perSecond` in all, each loop's gaps
   * drawn from an exponential distribution (Poisson arrivals). `iteration` gets the time it was due:
   * a worker still busy with its previous iteration starts late, and timing from the due time counts
   * that wait (no coordinated omission).
   */
  async paced(
    workers: number,
    durationMs: number,
    perSecond: number,
    iteration: (worker: number, dueAt: number) => Promise<void>,
  ): Promise<{ iterations: number; wallMs: number }> {
    const started = performance.now();
    const until = started + durationMs;
    const meanGapMs = (workers * 1000) / perSecond;
    let iterations = 0;
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        let due = started + Math.random() * meanGapMs;
        while (due < until) {
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          await iteration(w, due);
          iterations++;
          due += -meanGapMs * Math.log(1 - Math.random());
        }
      }),
    );
    return { iterations, wallMs: performance.now() - started };
  }

  /** Runs `fn(i)` for i in 0…count-1, `workers` at a time. */
  async each(count: number, workers: number, fn: (i: number) => Promise<void>): Promise<void> {
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(workers, count) }, async () => {
        while (next < count) await fn(next++);
      }),
    );
  }

  close(): Promise<void> {
    return this.#pool.close();
  }
}
