import { StringDecoder } from 'node:string_decoder';
import { Agent, request, type Dispatcher } from 'undici';
import { SseLineTooLongError, SseParser } from './sse-parser.ts';
import { ProviderError, type ChatEvent, type ChatTarget, type UpstreamAgent } from './types.ts';

/** Turns one wire protocol's SSE events into ChatEvents. */
export interface Translator {
  /** One SSE event; pushes what it yields into `out`; throws ProviderError for an in-stream error. */
  event(name: string, data: string, out: ChatEvent[]): void;
  /** True once the protocol's own end marker arrived ([DONE], message_stop); `finish` is then in `out`. */
  readonly ended: boolean;
  /** The body ended without an end marker: push usage and finish, or throw if the answer was cut short. */
  end(out: ChatEvent[]): void;
}

export interface UpstreamCall {
  readonly provider: string;
  readonly url: string;
  /** The provider's own headers (its key, its API version); streamSse adds the JSON and SSE ones. */
  readonly headers: Record<string, string>;
}

/**
 * Pooled keep-alive connections, no cap per origin (every open stream holds one). An idle
 * connection is kept 30 s unless the provider's Keep-Alive header says less: long enough to be reused by the next turn, shorter than providers' load
 * balancers keep one. Key probes go through it too.
 */
export function createUpstreamAgent(): UpstreamAgent {
  // undici's own header and body timeouts (300 s) are off: the idle timer above is the one rule for
  // upstream silence, so a long STREAM_IDLE_TIMEOUT_MS still ends as UPSTREAM_TIMEOUT.
  // Redirects are not followed: providers answer API calls directly, and a redirect would carry
  // x-api-key / x-goog-api-key (which no redirect handler strips) to wherever it points.
  return new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, headersTimeout: 0, bodyTimeout: 0 });
}

/** After the end marker the body should close at once; do not hold the stream open for a slow one. */
const END_GRACE_MS = 2000;
const ERROR_BODY_MAX = 64 * 1024;
/**
 * Every streaming call sends JSON and asks for SSE (no accept-encoding: SSE is read as sent).
 */
const DEFAULT_HEADERS = { 'user-agent': 'node', 'content-type': 'application/json', accept: 'text/event-stream' } as const;
const ENCODER = new TextEncoder();
/** The reason the request is aborted with when the provider was silent for too long. */
const IDLE = new Error('upstream idle timeout');
/** Chunks read while the consumer holds a batch beyond which the body is paused until it asks again. */
const HOLD_CHUNKS = 64;

/**
 * POSTs a streaming request and yields its events, one batch per chunk read from the body (never
 * empty, in order; chunks read while the consumer still holds a batch join the next one). An idle
 * timer (reset by every read, headers included) turns upstream silence into UPSTREAM_TIMEOUT; the
 * caller's signal aborts the socket at once and rethrows the signal's reason. No retries: a retry is
 * the client's decision.
 */
export function streamSse(
  call: UpstreamCall,
  body: string,
  target: ChatTarget,
  signal: AbortSignal,
  translator: Translator,
): AsyncIterableIterator<ChatEvent[]> {
  return new UpstreamRound(call, body, target, signal, translator);
}

/**
 * One streaming call as an async iterator. The body's chunks are decoded, parsed and translated as
 * they are read ('data' events), and a waiting `next()` is answered from there: one promise per chunk,
 * where a pull through the body's own async iterator and a generator cost several. Chunks read while
 * the consumer holds a batch join the next one (a burst makes few large batches); beyond HOLD_CHUNKS of
 * them the body is paused until it asks again, so nothing piles up.
 */
class UpstreamRound implements AsyncIterableIterator<ChatEvent[]> {
  readonly #call: UpstreamCall;
  readonly #target: ChatTarget;
  readonly #signal: AbortSignal;
  readonly #translator: Translator;
  readonly #ac = new AbortController();
  readonly #events: EventDecoder;
  #payload: Uint8Array | undefined;
  #idle: IdleWatch | undefined;
  #res: Dispatcher.ResponseData | undefined;
  #started = false;
  /** The body has ended (its end read, or not to be read any further). */
  #eof = false;
  /** Nothing more will come: the events held are the last. */
  #finished = false;
  /** Thrown once the events before it have been taken. */
  #failure: unknown;
  #failed = false;
  #closed = false;
  /** Chunks read since the consumer last took a batch. */
  #held = 0;
  #waiter: { resolve: (r: IteratorResult<ChatEvent[]>) => void; reject: (err: unknown) => void } | undefined;

  constructor(call: UpstreamCall, body: string, target: ChatTarget, signal: AbortSignal, translator: Translator) {
    this.#call = call;
    this.#target = target;
    this.#signal = signal;
    this.#translator = translator;
    this.#events = new EventDecoder(translator, call.provider);
    // undici keeps the body until the response ends. A string would become a Buffer from the shared
    // pool, and each stream would keep a whole pool slab (64 KB) alive; this one is its own. The
    // request (history, images) can be large; the stream can be long: one copy only is held.
    this.#payload = ENCODER.encode(body);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<ChatEvent[]>> {
    if (!this.#started) this.#start();
    const ready = this.#answer();
    if (ready !== undefined) return ready;
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
      if (this.#idle !== undefined) this.#idle.waiting = true;
      if (this.#res?.body.isPaused() === true && !this.#eof) this.#res.body.resume();
    });
  }

  /** The consumer stops early: the socket is closed (unless the body was read to its end). */
  return(): Promise<IteratorResult<ChatEvent[]>> {
    this.#started = true;
    this.#finished = true;
    // A request still on its way is called off.
    if (this.#res === undefined) this.#ac.abort(new Error('the round was given up'));
    this.#close();
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.resolve({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  /** What a `next()` gets now: the events held, then the failure, then the end; undefined: wait. */
  #answer(): Promise<IteratorResult<ChatEvent[]>> | undefined {
    const batch = this.#events.take();
    if (batch !== undefined) {
      this.#held = 0;
      if (this.#idle !== undefined) this.#idle.waiting = false;
      return Promise.resolve({ value: batch, done: false });
    }
    if (this.#failed) {
      this.#failed = false;
      this.#finished = true;
      this.#close();
      return Promise.reject(this.#failure);
    }
    if (this.#finished) {
      this.#close();
      return Promise.resolve({ value: undefined, done: true });
    }
    return undefined;
  }

  /** Answers a waiting `next()` when there is something to answer it with. */
  #wake(): void {
    const waiter = this.#waiter;
    if (waiter === undefined) return;
    const batch = this.#events.take();
    if (batch !== undefined) {
      this.#waiter = undefined;
      this.#held = 0;
      if (this.#idle !== undefined) this.#idle.waiting = false;
      waiter.resolve({ value: batch, done: false });
    } else if (this.#failed) {
      this.#waiter = undefined;
      this.#failed = false;
      this.#finished = true;
      this.#close();
      waiter.reject(this.#failure);
    } else if (this.#finished) {
      this.#waiter = undefined;
      this.#close();
      waiter.resolve({ value: undefined, done: true });
    }
  }

  #fail(err: unknown): void {
    if (this.#finished || this.#failed) return;
    this.#failure = err;
    this.#failed = true;
    this.#wake();
  }

  #onAbort = (): void => this.#ac.abort(this.#signal.reason);

  #start(): void {
    this.#started = true;
    const signal = this.#signal;
    if (signal.aborted) return this.#fail(signal.reason);
    signal.addEventListener('abort', this.#onAbort);
    this.#idle = new IdleWatch(this.#target.idleTimeoutMs, () => this.#ac.abort(IDLE));
    const payload = this.#payload ?? new Uint8Array();
    this.#payload = undefined;
    open(this.#call, payload, this.#target, this.#ac.signal, (err) => this.#failureOf(err)).then(
      (res) => {
        if (this.#closed) return void res.body.on('error', ignore).destroy();
        this.#res = res;
        this.#idle?.heard();
        res.body.on('data', this.#onData);
        res.body.on('end', this.#onEnd);
        res.body.on('error', this.#onError);
      },
      (err: unknown) => this.#fail(err),
    );
  }

  #failureOf(err: unknown): unknown {
    return upstreamFailure(err, this.#call.provider, this.#signal, this.#ac.signal);
  }

  #onData = (chunk: Buffer): void => {
    // After the end marker the body is read on only so the connection can be reused.
    if (this.#translator.ended || this.#finished || this.#failed) return;
    this.#idle?.heard();
    const events = this.#events;
    events.push(chunk);
    const failure = events.failure();
    if (failure !== undefined) {
      this.#fail(failure);
    } else if (this.#translator.ended) {
      // The answer is complete; the body is read on to its end so the connection can be reused, but not for long.
      this.#idle?.shorten(END_GRACE_MS);
    }
    if (this.#waiter !== undefined) this.#wake();
    else if (++this.#held >= HOLD_CHUNKS) this.#res?.body.pause();
  };

  #onEnd = (): void => {
    this.#eof = true;
    if (this.#finished || this.#failed) return this.#wake();
    if (this.#translator.ended) {
      this.#finished = true;
      return this.#wake();
    }
    const events = this.#events;
    events.end();
    let failure = events.failure();
    if (failure === undefined) {
      try {
        events.finish();
      } catch (err) {
        failure = err;
      }
    }
    if (failure !== undefined) return this.#fail(failure);
    this.#finished = true;
    this.#wake();
  };

  #onError = (err: unknown): void => {
    if (this.#translator.ended) {
      this.#finished = true;
      return this.#wake();
    }
    this.#fail(this.#failureOf(err));
  };

  /** Once: the timer stopped, the caller's signal let go, and the body destroyed unless it was read to its end. */
  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#idle?.stop();
    this.#signal.removeEventListener('abort', this.#onAbort);
    const res = this.#res;
    if (res === undefined) return;
    res.body.off('data', this.#onData);
    // Destroying the body aborts the request and closes its socket; the error that follows is ours.
    if (!this.#eof) res.body.on('error', ignore).destroy();
  }
}

/**
 * Sends the request; a status other than 2xx is read to its end (the connection stays reusable; its
 * first 64 KB kept) and thrown as its stream error. Owns the response until it returns it.
 */
async function open(
  call: UpstreamCall,
  payload: Uint8Array,
  target: ChatTarget,
  signal: AbortSignal,
  fail: (err: unknown) => unknown,
): Promise<Dispatcher.ResponseData> {
  let res: Dispatcher.ResponseData;
  try {
    res = await request(call.url, { dispatcher: target.agent, method: 'POST', headers: { ...DEFAULT_HEADERS, ...call.headers }, body: payload, signal });
  } catch (err) {
    throw fail(err);
  }
  const status = res.statusCode;
  if (status >= 200 && status <= 299) {
    // A stream answer without a body cannot carry the reply.
    if (status === 204 || status === 205) {
      res.body.on('error', ignore).destroy();
      throw new ProviderError('PROVIDER_UNAVAILABLE', true, `${call.provider} answered without a body`, status);
    }
    return res;
  }
  let text: string;
  try {
    text = (await res.body.text()).slice(0, ERROR_BODY_MAX);
  } catch (err) {
    res.body.on('error', ignore).destroy();
    throw fail(err);
  }
  throw errorForStatus(call.provider, status, text);
}

/**
 * Upstream silence: `onSilent` runs after `ms` without a read, counted only while this side waits
 * for the provider — a consumer that is slow to take an event (a client not reading, backpressure)
 * is not the provider's fault. A read only notes the time: the timer, when it fires early, is set
 * again for what is left (no timer operation per read).
 */
class IdleWatch {
  waiting = true;
  #ms: number;
  readonly #onSilent: () => void;
  #heardAt = Date.now();
  #timer: NodeJS.Timeout;

  constructor(ms: number, onSilent: () => void) {
    this.#ms = ms;
    this.#onSilent = onSilent;
    this.#timer = setTimeout(this.#fire, ms);
  }

  #fire = (): void => {
    const now = Date.now();
    if (!this.waiting) this.#heardAt = now;
    const left = this.#heardAt + this.#ms - now;
    if (left <= 0) this.#onSilent();
    else this.#timer = setTimeout(this.#fire, left);
  };

  heard(): void {
    this.#heardAt = Date.now();
  }

  /** From now on, silent after at most `ms`. */
  shorten(ms: number): void {
    clearTimeout(this.#timer);
    this.#ms = Math.min(ms, this.#ms);
    this.#heardAt = Date.now();
    this.#timer = setTimeout(this.#fire, this.#ms);
  }

  stop(): void {
    clearTimeout(this.#timer);
  }
}

/**
 * The body's bytes as ChatEvents: UTF-8 decoded (a byte order mark at the start dropped, as
 * the WHATWG decoding rule does), parsed as SSE, translated. A failure inside a chunk stops parsing but keeps the
 * events before it, so every delta the provider produced before its error still reaches the client.
 */
class EventDecoder {
  #out: ChatEvent[] = [];
  #failure: unknown;
  #started = false;
  readonly #decoder = new StringDecoder('utf8');
  readonly #parser: SseParser;
  readonly #translator: Translator;
  readonly #provider: string;

  constructor(translator: Translator, provider: string) {
    this.#translator = translator;
    this.#provider = provider;
    this.#parser = new SseParser((name, data) => {
      if (this.#failure !== undefined || translator.ended) return;
      try {
        translator.event(name, data, this.#out);
      } catch (err) {
        this.#failure = err;
      }
    });
  }

  push(chunk: Buffer): void {
    try {
      this.#parser.push(this.#withoutBom(this.#decoder.write(chunk)));
    } catch (err) {
      this.#failure ??= err;
    }
  }

  /** The body ended: what the decoder and the parser still hold. */
  end(): void {
    try {
      this.#parser.push(this.#withoutBom(this.#decoder.end()));
      this.#parser.end();
    } catch (err) {
      this.#failure ??= err;
    }
  }

  /** The body ended without the protocol's end marker: the translator's last events (or its error). */
  finish(): void {
    this.#translator.end(this.#out);
  }

  /** The events so far, handed over; undefined when there are none. */
  take(): ChatEvent[] | undefined {
    if (this.#out.length === 0) return undefined;
    const batch = this.#out;
    this.#out = [];
    return batch;
  }

  /** Why parsing stopped (as the stream's error), or undefined. */
  failure(): unknown {
    return this.#failure === undefined ? undefined : malformed(this.#failure, this.#provider);
  }

  #withoutBom(text: string): string {
    if (this.#started || text.length === 0) return text;
    this.#started = true;
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  }
}

function ignore(): void {}

/** `own` is the request's signal: aborted with the caller's reason, or by the idle timer. */
function upstreamFailure(err: unknown, provider: string, signal: AbortSignal, own: AbortSignal): unknown {
  if (signal.aborted) return signal.reason;
  if (own.aborted) return new ProviderError('UPSTREAM_TIMEOUT', true, `${provider} sent nothing for too long`);
  if (err instanceof ProviderError) return err;
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  const code = cause !== null && typeof cause === 'object' && 'code' in cause ? String(cause.code) : '';
  return new ProviderError('PROVIDER_UNAVAILABLE', true, `connection to ${provider} failed${code ? ` (${code})` : ''}`);
}

function malformed(failure: unknown, provider: string): ProviderError {
  if (failure instanceof ProviderError) return failure;
  const what = failure instanceof SseLineTooLongError ? 'an oversized event' : 'a malformed event';
  return new ProviderError('PROVIDER_ERROR', true, `${provider} sent ${what}`);
}

const TOKEN = /^[A-Za-z0-9_.-]{1,64}$/;

/** A short machine label of a provider error body (type/code/status), never its free text. */
function errorLabel(body: unknown): string {
  if (body === null || typeof body !== 'object') return '';
  const err = 'error' in body && body.error !== null && typeof body.error === 'object' ? body.error : body;
  for (const key of ['type', 'code', 'status']) {
    const v = (err as Record<string, unknown>)[key];
    if (typeof v === 'string' && TOKEN.test(v)) return v;
  }
  return '';
}

// Google and xAI refuse a bad key with 400; their bodies say so in words, not with a status.
const BAD_KEY = /api[ _-]?key/i;
const BAD_KEY_VERB = /invalid|incorrect|not valid|expired/i;

/** Maps an HTTP error status (and, for 400, its body) to the stream error codes. */
function errorForStatus(provider: string, status: number, text: string): ProviderError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const label = errorLabel(parsed);
  const detail = `${provider} answered ${status}${label ? ` (${label})` : ''}`;
  if (status === 401 || status === 403) return new ProviderError('PROVIDER_AUTH_FAILED', false, detail, status);
  if (status === 400 && BAD_KEY.test(text) && BAD_KEY_VERB.test(text)) return new ProviderError('PROVIDER_AUTH_FAILED', false, detail, status);
  if (status === 429) return new ProviderError('PROVIDER_RATE_LIMITED', true, detail, status);
  if (status === 408 || status >= 500) return new ProviderError('PROVIDER_UNAVAILABLE', true, detail, status);
  return new ProviderError('PROVIDER_ERROR', false, detail, status);
}

/** Maps an error object sent inside a 200 stream (by its type, code or numeric status). */
export function inStreamError(provider: string, err: unknown): ProviderError {
  const record = err !== null && typeof err === 'object' ? (err as Record<string, unknown>) : {};
  const numeric = typeof record['code'] === 'number' ? record['code'] : undefined;
  const label = errorLabel({ error: record });
  const detail = `${provider} stream error${label ? ` (${label})` : numeric !== undefined ? ` (${numeric})` : ''}`;
  if (/rate_limit|RESOURCE_EXHAUSTED/i.test(label) || numeric === 429) return new ProviderError('PROVIDER_RATE_LIMITED', true, detail);
  if (/auth|api_key|permission|UNAUTHENTICATED|PERMISSION_DENIED/i.test(label) || numeric === 401 || numeric === 403) {
    return new ProviderError('PROVIDER_AUTH_FAILED', false, detail);
  }
  if (/invalid_request|INVALID_ARGUMENT|not_found|request_too_large/i.test(label) || (numeric !== undefined && numeric >= 400 && numeric < 500)) {
    return new ProviderError('PROVIDER_ERROR', false, detail);
  }
  return new ProviderError('PROVIDER_UNAVAILABLE', true, detail);
}

export function incomplete(provider: string): ProviderError {
  return new ProviderError('PROVIDER_UNAVAILABLE', true, `${provider} stream ended before the answer was complete`);
}

/** A count as a provider reports it (tokens, cost): a finite number, or null when absent or not a number. */
export const count = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export function base64(data: Buffer): string {
  return data.toString('base64');
}

export const MIME: Record<'png' | 'jpeg' | 'webp', string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };
