export type SseHandler = (event: string, data: string) => void;

/** An upstream that never ends a line would otherwise grow the buffer without bound. */
const MAX_PENDING_CHARS = 8 * 1024 * 1024;

export class SseLineTooLongError extends Error {
  constructor() {
    super('SSE line exceeds the size limit');
    this.name = 'SseLineTooLongError';
  }
}

/**
 * Incremental text/event-stream parser (WHATWG rules): lines end in LF, CRLF or CR (also split across
 * chunks), `:` lines are comments, several `data:` lines join with LF, an empty line dispatches.
 * Fields other than `event` and `data` are ignored. It scans with indexOf and slices only the data
 * values, so a typical chunk costs one string per event and nothing else.
 */
export class SseParser {
  readonly #onEvent: SseHandler;
  #buf = '';
  #event = '';
  #data: string | undefined = undefined;
  /** The previous chunk ended in CR: an LF starting the next one belongs to that line end. */
  #pendingCr = false;

  constructor(onEvent: SseHandler) {
    this.#onEvent = onEvent;
  }

  push(chunk: string): void {
    // An empty chunk (a decoder holding a partial character) must not forget a pending CR.
    if (chunk.length === 0) return;
    const buf = this.#buf.length === 0 ? chunk : this.#buf + chunk;
    const len = buf.length;
    let pos = 0;
    if (this.#pendingCr) {
      this.#pendingCr = false;
      if (buf.charCodeAt(0) === 10) pos = 1;
    }
    // -2 means "not searched yet"; -1 means "none left in this buffer", so each is scanned once per line.
    let lf = -2;
    let cr = -2;
    while (pos < len) {
      if (lf !== -1 && lf < pos) lf = buf.indexOf('\n', pos);
      if (cr !== -1 && cr < pos) cr = buf.indexOf('\r', pos);
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr;
        if (cr + 1 === len) {
          next = len;
          this.#pendingCr = true;
        } else {
          next = buf.charCodeAt(cr + 1) === 10 ? cr + 2 : cr + 1;
        }
      } else if (lf !== -1) {
        end = lf;
        next = lf + 1;
      } else {
        break;
      }
      this.#line(buf, pos, end);
      pos = next;
    }
    this.#buf = pos >= len ? '' : buf.slice(pos);
    if (this.#buf.length > MAX_PENDING_CHARS) throw new SseLineTooLongError();
  }

  /** End of input: a last line without its line end and a last event without its blank line still count. */
  end(): void {
    if (this.#buf.length > 0) {
      const rest = this.#buf;
      this.#buf = '';
      this.#line(rest, 0, rest.length);
    }
    this.#dispatch();
  }

  #line(buf: string, start: number, end: number): void {
    if (start === end) return this.#dispatch();
    if (buf.charCodeAt(start) === 58) return; // ':' comment (keep-alives such as ": OPENROUTER PROCESSING")
    let colon = buf.indexOf(':', start);
    if (colon === -1 || colon > end) colon = end;
    const nameLength = colon - start;
    let valueStart = colon + 1;
    if (valueStart < end && buf.charCodeAt(valueStart) === 32) valueStart++;
    const value = valueStart >= end ? '' : buf.slice(valueStart, end);
    if (nameLength === 4 && buf.startsWith('data', start)) {
      this.#data = this.#data === undefined ? value : `${this.#data}\n${value}`;
    } else if (nameLength === 5 && buf.startsWith('event', start)) {
      this.#event = value;
    }
  }

  #dispatch(): void {
    const data = this.#data;
    const event = this.#event;
    this.#data = undefined;
    this.#event = '';
    if (data !== undefined) this.#onEvent(event === '' ? 'message' : event, data);
  }
}
