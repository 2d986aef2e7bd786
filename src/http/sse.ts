import type { ServerResponse } from 'node:http';
import type { Frame } from '../platform/frames.ts';
import type { FrameSink } from '../platform/frame-log.ts';

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/** Frames held back beyond this many characters are written at once (bounds the string and reports backpressure). */
const FLUSH_CHARS = 32 * 1024;

/**
 * Server-Sent Events onto a raw response. Every event gets the next `id:`. The frames of one tick
 * (the several events of one upstream chunk) are joined into one string and handed to the response
 * in one `write` on the next tick, so they leave in one chunk of the chunked encoding and one
 * syscall (Node's own write path keeps the socket corked until then). A write returns false when
 * the response's buffer is over its high-water mark (now or after an earlier write), so the caller
 * can respect backpressure with `drained()`; at most FLUSH_CHARS are held back.
 */
export class SseWriter implements FrameSink {
  readonly #res: ServerResponse;
  /** A client that reads nothing for this long while frames wait is treated as gone (DESIGN §10). */
  readonly #stallMs: number | undefined;
  #id = 0;
  /** Frames not yet handed to the response. */
  #pending = '';
  #scheduled = false;

  constructor(res: ServerResponse, opts: { stallMs?: number } = {}) {
    this.#res = res;
    this.#stallMs = opts.stallMs;
  }

  /** Sends the status line and headers (the caller's, e.g. X-Request-Id, plus the SSE ones). */
  open(headers: Readonly<Record<string, string | number | string[] | undefined>>): void {
    const res = this.#res;
    for (const name in headers) {
      const value = headers[name];
      if (value !== undefined) res.setHeader(name, value);
    }
    res.writeHead(200, SSE_HEADERS);
  }

  /** `data` must be a single line (JSON.stringify output is). */
  event(name: string, data: string): boolean {
    return this.#write(`id: ${++this.#id}\nevent: ${name}\ndata: ${data}\n\n`);
  }

  /** Frames of a turn's log, ids and all, as they are (DESIGN §12: the same ids for every client). */
  write(frames: readonly Frame[]): boolean {
    let ok = true;
    for (const f of frames) ok = this.#write(f.wire);
    return ok;
  }

  comment(text: string): boolean {
    return this.#write(`: ${text}\n\n`);
  }

  get needsDrain(): boolean {
    return this.#res.writableNeedDrain;
  }

  /** Writes what is held back together with the end of the response. */
  end(): void {
    const res = this.#res;
    const rest = this.#pending;
    this.#pending = '';
    if (res.writableEnded) return;
    if (rest.length > 0 && !res.destroyed) res.end(rest);
    else res.end();
  }

  /**
   * Resolves when the socket buffer has drained, the connection closed, or `signal` aborted. A client
   * that has not read for the stall timeout is cut off (its connection destroyed, the frames waiting
   * for it dropped), which closes the connection.
   */
  drained(signal: AbortSignal): Promise<void> {
    const res = this.#res;
    if (!res.writableNeedDrain || res.destroyed || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const stall = this.#stallMs === undefined ? undefined : setTimeout(() => res.destroy(), this.#stallMs);
      const done = (): void => {
        clearTimeout(stall);
        res.off('drain', done);
        res.off('close', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
      signal.addEventListener('abort', done);
    });
  }

  #write(frame: string): boolean {
    const res = this.#res;
    if (res.destroyed || res.writableEnded) return true;
    if (this.#pending.length === 0) {
      this.#pending = frame;
      if (!this.#scheduled) {
        this.#scheduled = true;
        process.nextTick(SseWriter.#flushTick, this);
      }
    } else {
      this.#pending += frame;
    }
    if (this.#pending.length >= FLUSH_CHARS) return this.#flush();
    return !res.writableNeedDrain;
  }

  #flush(): boolean {
    const chunk = this.#pending;
    const res = this.#res;
    if (chunk.length === 0) return !res.writableNeedDrain;
    this.#pending = '';
    if (res.destroyed || res.writableEnded) return true;
    return res.write(chunk);
  }

  static #flushTick(w: SseWriter): void {
    w.#scheduled = false;
    w.#flush();
  }
}
