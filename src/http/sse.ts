import type { ServerResponse } from 'node:http';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/**
 * Server-Sent Events onto a raw response. Every event gets the next `id:`. Writes made in the same
 * tick (the several events of one upstream chunk) leave in one socket write: the response is corked
 * on the first and uncorked on the next tick. `write` results are returned so the caller can respect
 * backpressure with `drained()`.
 */
export class SseWriter {
  readonly #res: ServerResponse;
  #id = 0;
  #corked = false;

  constructor(res: ServerResponse) {
    this.#res = res;
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
    this.#id++;
    return this.#write(`id: ${this.#id}\nevent: ${name}\ndata: ${data}\n\n`);
  }

  comment(text: string): boolean {
    return this.#write(`: ${text}\n\n`);
  }

  /** The client is still there and the response not ended. */
  get writable(): boolean {
    return !this.#res.destroyed && !this.#res.writableEnded;
  }

  get needsDrain(): boolean {
    return this.#res.writableNeedDrain;
  }

  end(): void {
    SseWriter.#uncork(this);
    if (!this.#res.writableEnded) this.#res.end();
  }

  /** Resolves when the socket buffer has drained, the connection closed, or `signal` aborted. */
  drained(signal: AbortSignal): Promise<void> {
    const res = this.#res;
    if (!res.writableNeedDrain || res.destroyed || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
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

  #write(chunk: string): boolean {
    const res = this.#res;
    if (res.destroyed || res.writableEnded) return true;
    if (!this.#corked) {
      this.#corked = true;
      res.cork();
      process.nextTick(SseWriter.#uncork, this);
    }
    return res.write(chunk);
  }

  /** Each cork is matched by exactly one uncork (whichever of end() and the next tick comes first). */
  static #uncork(w: SseWriter): void {
    if (!w.#corked) return;
    w.#corked = false;
    w.#res.uncork();
  }
}
