// A load-generator SSE client: it does not parse events, it counts byte markers (a delta frame's
// marker, the end marker) across chunk boundaries, so it costs the same for every target and little
// enough that the measured side, not the client, is the limit. It timestamps the first delta.
import http from 'node:http';
import { performance } from 'node:perf_hooks';

export interface Markers {
  /** Occurs in the first frame of the body (the one that opens a stream). */
  readonly start: Buffer;
  /** Occurs once in every delta frame and nowhere else. */
  readonly delta: Buffer;
  /** Occurs once, in the frame that ends a complete stream. */
  readonly end: Buffer;
}

/** The service's frames (`event: start`, `event: delta`, `event: done`). */
export const SERVICE_MARKERS: Markers = { start: Buffer.from('event: start\n'), delta: Buffer.from('event: delta\n'), end: Buffer.from('event: done\n') };
/** Raw OpenAI chunks as the bare proxy passes them: the role chunk, content deltas (not the role chunk), `[DONE]`. */
export const OPENAI_MARKERS: Markers = {
  start: Buffer.from('"delta":{"role":"assistant"'),
  delta: Buffer.from('"delta":{"content":'),
  end: Buffer.from('data: [DONE]'),
};

export interface StreamResult {
  readonly status: number;
  /** performance.now() when the request was handed to the socket layer. */
  readonly startedAt: number;
  /** performance.now() when the first chunk holding a delta arrived. */
  readonly firstDeltaAt: number | undefined;
  /** performance.now() when the last chunk holding a delta arrived. */
  readonly lastDeltaAt: number | undefined;
  readonly endedAt: number;
  readonly deltas: number;
  /** The body's first frame held the start marker. */
  readonly opened: boolean;
  /** The last bytes of the body (the frame that ended an incomplete stream says why). */
  readonly tail: string;
  /** The end marker arrived and the response ended. */
  readonly complete: boolean;
  readonly error: string | undefined;
}

export interface OpenStream {
  /** Settles when the response ends, fails or is aborted; never rejects. */
  readonly result: Promise<StreamResult>;
  /** Resolves at the first delta (or when the stream settles without one). */
  readonly firstDelta: Promise<void>;
  /** The result once settled, else undefined. */
  settled(): StreamResult | undefined;
  abort(): void;
}

const TAIL_BYTES = 300;
/** A first frame longer than this is not looked for further (opened stays false). */
const HEAD_BYTES = 4096;
const FRAME_END = Buffer.from('\n\n');

/**
 * The body's first frame, gathered from the chunks until it is complete: only the first chunk or two
 * of a stream are looked at, so it costs the client nothing per delta.
 */
class FirstFrame {
  #head: Buffer | undefined = Buffer.alloc(0);
  frame: Buffer | undefined;

  push(chunk: Buffer): void {
    if (this.#head === undefined) return;
    const head = this.#head.length === 0 ? chunk : Buffer.concat([this.#head, chunk]);
    const end = head.indexOf(FRAME_END);
    if (end >= 0) this.frame = Buffer.from(head.subarray(0, end));
    this.#head = end < 0 && head.length < HEAD_BYTES ? head : undefined;
  }
}

/** Counts a marker's occurrences in a stream of chunks, also those split across two chunks. */
export class MarkerCounter {
  readonly #marker: Buffer;
  #tail: Buffer = Buffer.alloc(0);
  count = 0;

  constructor(marker: Buffer) {
    this.#marker = marker;
  }

  push(chunk: Buffer): number {
    const m = this.#marker;
    let found = 0;
    // The tail is shorter than the marker, so every match in tail+head straddles the boundary.
    if (this.#tail.length > 0) found += occurrences(Buffer.concat([this.#tail, chunk.subarray(0, m.length - 1)]), m);
    found += occurrences(chunk, m);
    const keep = m.length - 1;
    this.#tail = chunk.length >= keep ? Buffer.from(chunk.subarray(chunk.length - keep)) : Buffer.concat([this.#tail, chunk]).subarray(-keep);
    this.count += found;
    return found;
  }
}

function occurrences(haystack: Buffer, needle: Buffer): number {
  let n = 0;
  let at = haystack.indexOf(needle);
  while (at !== -1) {
    n++;
    at = haystack.indexOf(needle, at + needle.length);
  }
  return n;
}

export interface StreamRequest {
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly agent: http.Agent;
  readonly markers: Markers;
  /** The stream is aborted (an error) if it has not ended by then. */
  readonly timeoutMs: number;
  /** Sees every chunk of a 200 body as it arrives (performance.now()), e.g. to time markers of its own. */
  readonly onChunk?: ((chunk: Buffer, at: number) => void) | undefined;
}

export function openStream(req: StreamRequest): OpenStream {
  const deltas = new MarkerCounter(req.markers.delta);
  let tail = Buffer.alloc(0);
  const ends = new MarkerCounter(req.markers.end);
  const first = new FirstFrame();
  let status = 0;
  let firstDeltaAt: number | undefined;
  let lastDeltaAt: number | undefined;
  let error: string | undefined;
  let final: StreamResult | undefined;
  let resolveFirst: () => void = () => undefined;
  const firstDelta = new Promise<void>((r) => (resolveFirst = r));
  let resolveResult: (r: StreamResult) => void = () => undefined;
  const result = new Promise<StreamResult>((r) => (resolveResult = r));
  const body = Buffer.from(req.body);
  const startedAt = performance.now();
  const finish = (complete: boolean): void => {
    if (final !== undefined) return;
    clearTimeout(timer);
    const opened = first.frame?.includes(req.markers.start) ?? false;
    final = {
      status,
      startedAt,
      firstDeltaAt,
      lastDeltaAt,
      endedAt: performance.now(),
      deltas: deltas.count,
      opened,
      tail: tail.toString('utf8'),
      complete,
      error,
    };
    resolveFirst();
    resolveResult(final);
  };
  const timer = setTimeout(() => {
    error ??= `no end within ${req.timeoutMs} ms`;
    cr.destroy();
  }, req.timeoutMs);
  const cr = http.request(
    {
      host: req.url.hostname,
      port: req.url.port,
      path: `${req.url.pathname}${req.url.search}`,
      method: 'POST',
      agent: req.agent,
      headers: { ...req.headers, 'content-type': 'application/json', 'content-length': String(body.length), accept: 'text/event-stream' },
    },
    (res) => {
      status = res.statusCode ?? 0;
      if (status !== 200) {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c.slice(0, 500)));
        res.on('end', () => {
          error = `HTTP ${status}: ${text.slice(0, 300)}`;
          finish(false);
        });
        return;
      }
      const onChunk = req.onChunk;
      res.on('data', (chunk: Buffer) => {
        if (onChunk !== undefined) onChunk(chunk, performance.now());
        first.push(chunk);
        if (deltas.push(chunk) > 0) {
          lastDeltaAt = performance.now();
          if (firstDeltaAt === undefined) {
            firstDeltaAt = lastDeltaAt;
            resolveFirst();
          }
        }
        ends.push(chunk);
        tail = Buffer.concat([tail, chunk]).subarray(-TAIL_BYTES);
      });
      res.on('end', () => finish(ends.count > 0));
      res.on('error', (err) => {
        error ??= err.message;
        finish(false);
      });
      res.on('close', () => {
        error ??= 'closed before the end';
        finish(false);
      });
    },
  );
  cr.on('error', (err) => {
    error ??= err.message;
    finish(false);
  });
  cr.end(body);
  return {
    result,
    firstDelta,
    settled: () => final,
    abort() {
      error ??= 'aborted';
      cr.destroy();
    },
  };
}

/**
 * Opens `n` streams, at most `starting` of them before their first delta at once; every one must get
 * there (else all are aborted and this throws, naming `name`).
 */
export async function openAll(n: number, open: (i: number) => OpenStream, name: string, starting: number): Promise<OpenStream[]> {
  const opened: OpenStream[] = [];
  let next = 0;
  let failure: string | undefined;
  await Promise.all(
    Array.from({ length: Math.min(starting, n) }, async () => {
      while (next < n && failure === undefined) {
        const s = open(next++);
        opened.push(s);
        await s.firstDelta;
        const ended = s.settled();
        if (ended !== undefined) failure ??= `stream ended before staying open: status ${ended.status}, ${ended.error ?? 'no error'}`;
      }
    }),
  );
  if (failure !== undefined) {
    for (const s of opened) s.abort();
    throw new Error(`${name}: ${failure}`);
  }
  return opened;
}
