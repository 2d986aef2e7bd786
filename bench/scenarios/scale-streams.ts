// Process entry: the scale row's idle streams and their heartbeats, held apart from the bench process so
// that reading them (the service's ticker pings a tenth of them at once) never delays the probe's client.
// Cheap per stream: a marker count per chunk, no body kept. Asked over IPC (procs.ts `ask`):
//   { open: { url, tokens, starting } } → { openMs } once every stream showed its first delta, or { error }
//   { window: 'open' }                  → {}  heartbeats are timed from now
//   { window: 'close', lateMs }         → the heartbeats' gaps, streams without one or late at the end, streams ended, event-loop delay
//   { close: true }                     → {}  once every stream has ended
import http from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { MarkerCounter, openAll, type OpenStream } from '../lib/sse-client.ts';
import { serviceStream } from './targets.ts';

/** The keep-alive comment's wire form (SseWriter.comment('ping'), DESIGN §7). */
const PING = Buffer.from(': ping\n\n');

export type StreamsRequest =
  | { readonly open: { readonly url: string; readonly tokens: readonly string[]; readonly starting: number } }
  | { readonly window: 'open' }
  | { readonly window: 'close'; readonly lateMs: number }
  | { readonly close: true };

export interface WindowReport {
  /** Times between consecutive heartbeats of a stream, within the window, ms. */
  readonly gaps: number[];
  /** Streams with no heartbeat in the window. */
  readonly silent: number;
  /** Streams whose last heartbeat came more than `lateMs` before the window's end (a late gap still open). */
  readonly lateOpen: number;
  /** Streams that ended (they should all be open). */
  readonly ended: number;
  readonly loopP99Ms: number;
  readonly loopMaxMs: number;
}

/** Heartbeats of the streams, timed as received, within the window only. */
class Heartbeats {
  readonly #counters: MarkerCounter[];
  readonly #last: Float64Array;
  readonly gaps: number[] = [];
  #open = false;

  constructor(n: number) {
    this.#counters = Array.from({ length: n }, () => new MarkerCounter(PING));
    this.#last = new Float64Array(n).fill(NaN);
  }

  onChunk(i: number, chunk: Buffer, at: number): void {
    const counter = this.#counters[i];
    if (counter === undefined || counter.push(chunk) === 0 || !this.#open) return;
    const last = this.#last[i] ?? NaN;
    if (!Number.isNaN(last)) this.gaps.push(at - last);
    this.#last[i] = at;
  }

  open(): void {
    this.#open = true;
  }

  close(lateMs: number): { silent: number; lateOpen: number } {
    this.#open = false;
    const end = performance.now();
    let silent = 0;
    let lateOpen = 0;
    for (const last of this.#last) {
      if (Number.isNaN(last)) silent++;
      else if (end - last > lateMs) lateOpen++;
    }
    return { silent, lateOpen };
  }
}

const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const loop = monitorEventLoopDelay({ resolution: 10 });
let streams: OpenStream[] = [];
let heartbeats = new Heartbeats(0);

async function answer(m: StreamsRequest): Promise<object> {
  if ('open' in m) {
    const { url, tokens, starting } = m.open;
    heartbeats = new Heartbeats(tokens.length);
    const t0 = performance.now();
    try {
      streams = await openAll(
        tokens.length,
        (i) => serviceStream(url, tokens[i] ?? '', agent, (c, at) => heartbeats.onChunk(i, c, at)),
        'scale streams',
        starting,
      );
    } catch (err) {
      return { error: err instanceof Error ? err.message : String(err) };
    }
    return { openMs: performance.now() - t0 };
  }
  if ('close' in m) {
    for (const s of streams) s.abort();
    await Promise.all(streams.map((s) => s.result));
    streams = [];
    return {};
  }
  if (m.window === 'open') {
    heartbeats.open();
    loop.reset();
    loop.enable();
    return {};
  }
  loop.disable();
  const report: WindowReport = {
    gaps: heartbeats.gaps,
    ...heartbeats.close(m.lateMs),
    ended: streams.filter((s) => s.settled() !== undefined).length,
    loopP99Ms: loop.percentile(99) / 1e6,
    loopMaxMs: loop.max / 1e6,
  };
  return report;
}

process.on('message', (m: StreamsRequest & { id: number }) => {
  void answer(m).then((reply) => process.send?.({ id: m.id, ...reply }));
});
process.once('disconnect', () => process.exit(0));
process.stdout.write('scale streams ready\n');
