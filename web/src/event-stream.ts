// A reply's frames read off a fetch response as they come (DESIGN §7, §12), and a reply followed across
// reconnects the way a browser's EventSource would — but with the token in the Authorization header and
// the last frame id in Last-Event-ID, never in the URL (issue 41 item 8: proxies and access logs record
// URLs). No DOM and no session: the caller opens the request (unit-tested under node).
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { Frame } from './reply.ts';

const FRAME_EVENTS: ReadonlySet<string> = new Set(['start', 'snapshot', 'delta', 'tool_call', 'tool_result', 'done', 'error']);
const TERMINAL: ReadonlySet<string> = new Set(['done', 'error']);

export interface StreamRead {
  /** The terminal frame (`done` / `error`) came: nothing follows. Otherwise the stream ended or broke before it. */
  readonly terminal: boolean;
  /** The server's `retry:` field, if it sent one (milliseconds). */
  readonly retryMs: number | undefined;
}

/**
 * Reads an SSE body frame by frame, parsed incrementally (a frame split across chunks, or a character
 * across bytes, comes whole). Resolves at the terminal frame (the rest of the body is let go), or when
 * the body ends or the connection breaks before it (`terminal: false`: the caller resumes). A frame
 * whose data is not JSON rejects.
 */
export async function readFrames(body: ReadableStream<Uint8Array<ArrayBuffer>>, onFrame: (f: Frame) => void): Promise<StreamRead> {
  let retryMs: number | undefined;
  const events = body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream({ onRetry: (ms) => (retryMs = ms) }));
  const reader = events.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { terminal: false, retryMs };
      if (!value.event || !FRAME_EVENTS.has(value.event)) continue;
      onFrame({ id: Number(value.id ?? 0), event: value.event, data: JSON.parse(value.data) });
      if (TERMINAL.has(value.event)) {
        reader.cancel().catch(() => undefined);
        return { terminal: true, retryMs };
      }
    }
  } catch (err) {
    // The connection broke mid-reply (a network error is a TypeError; an aborted read an AbortError).
    if (err instanceof TypeError || (err instanceof DOMException && err.name === 'AbortError')) return { terminal: false, retryMs };
    throw err;
  } finally {
    reader.releaseLock();
  }
}

/** How following a reply ended. */
export type FollowEnd =
  /** Its terminal frame came, or the service answered 204 (no turn, or the client has the terminal frame already). */
  | 'ended'
  /** The service refused the attach (4xx, or a 5xx it does not ask to retry), or reconnecting kept failing. */
  | 'refused'
  /** The caller let go (its signal). */
  | 'detached';

export interface FollowOptions {
  /**
   * Opens the stream with these headers (`Last-Event-ID` once a frame has been taken in); the caller adds
   * the token as `Authorization`. Rejects when the request fails (network) or the signal aborts.
   */
  readonly open: (headers: Readonly<Record<string, string>>, signal: AbortSignal) => Promise<Response>;
  /** The id of the last frame the caller has (0: from the start, or a snapshot). */
  readonly lastEventId: number;
  readonly onFrame: (f: Frame) => void;
  readonly signal: AbortSignal;
  /** Waits before a reconnect (a test passes its own clock). Resolves early when the signal aborts. */
  readonly wait?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** The first reconnect waits this long; each attempt in a row that brings no frame doubles it, up to MAX_DELAY_MS. */
export const FIRST_DELAY_MS = 1000;
const MAX_DELAY_MS = 8000;
/** Attempts in a row that bring no frame before following gives up ('refused': the page reads the stored conversation). */
export const MAX_FRUITLESS_ATTEMPTS = 8;
/** A Retry-After longer than this is not waited out: the page reads the stored conversation instead. */
const MAX_RETRY_AFTER_MS = 30_000;

/** Statuses a reconnect may cure: the service (503 with Retry-After, DESIGN §3) or a proxy in front of it. */
const RETRIED = new Set([502, 503, 504]);

function timer(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(id);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const id = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

function retryAfterMs(response: Response): number | undefined {
  const raw = response.headers.get('retry-after');
  const seconds = raw === null ? NaN : Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/**
 * Follows a reply until its terminal frame (DESIGN §12): attaches from `lastEventId`, and after a cut
 * reconnects with the id of the last frame taken in as `Last-Event-ID` — as an EventSource does — so a
 * resumed client never sees a frame twice or misses one. A 204 ends it; a 502/503/504 or a broken
 * connection is retried (after Retry-After when the service says, else after a delay that grows while
 * attempts bring nothing); any other status ends it as refused.
 */
export async function followStream(opts: FollowOptions): Promise<FollowEnd> {
  const { open, onFrame, signal, wait = timer } = opts;
  let last = opts.lastEventId;
  let fruitless = 0;
  let serverRetryMs: number | undefined;
  let progressed = false;
  const take = (f: Frame) => {
    if (f.id > last) last = f.id;
    progressed = true;
    onFrame(f);
  };
  for (;;) {
    if (signal.aborted) return 'detached';
    let pauseMs: number | undefined;
    progressed = false;
    try {
      const response = await open(last > 0 ? { 'last-event-id': String(last) } : {}, signal);
      if (response.status === 204) return 'ended';
      if (response.ok && response.body) {
        const read = await readFrames(response.body, take);
        serverRetryMs = read.retryMs ?? serverRetryMs;
        if (read.terminal) return 'ended';
      } else if (RETRIED.has(response.status)) {
        await response.body?.cancel().catch(() => undefined);
        pauseMs = retryAfterMs(response);
        if (pauseMs !== undefined && pauseMs > MAX_RETRY_AFTER_MS) return 'refused';
      } else {
        await response.body?.cancel().catch(() => undefined);
        return signal.aborted ? 'detached' : 'refused';
      }
    } catch (err) {
      if (signal.aborted) return 'detached';
      // fetch rejects with a TypeError when the request fails on the network; anything else is a fault.
      if (!(err instanceof TypeError)) throw err;
    }
    if (signal.aborted) return 'detached';
    fruitless = progressed ? 0 : fruitless + 1;
    if (fruitless >= MAX_FRUITLESS_ATTEMPTS) return 'refused';
    await wait(pauseMs ?? serverRetryMs ?? Math.min(FIRST_DELAY_MS * 2 ** Math.max(0, fruitless - 1), MAX_DELAY_MS), signal);
  }
}
