import { SseLineTooLongError, SseParser } from './sse-parser.ts';
import { ProviderError, type ChatEvent, type ChatTarget } from './types.ts';

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
  readonly headers: Record<string, string>;
}

const DECODE_STREAM = { stream: true } as const;
/** After the end marker the body should close at once; do not hold the stream open for a slow one. */
const END_GRACE_MS = 2000;
const ERROR_BODY_MAX = 64 * 1024;

/**
 * POSTs a streaming request and yields its events. An idle timer (reset by every byte, headers
 * included) turns upstream silence into UPSTREAM_TIMEOUT; the caller's signal aborts the socket
 * at once and rethrows the signal's reason. No retries: a retry is the client's decision.
 */
export async function* streamSse(
  call: UpstreamCall,
  body: string,
  target: ChatTarget,
  signal: AbortSignal,
  translator: Translator,
): AsyncGenerator<ChatEvent> {
  const idle = new AbortController();
  // Only silence while this side waits for the provider counts: a consumer that is slow to take an
  // event (a client not reading, backpressure) is not the provider's fault.
  let waiting = true;
  const onIdle = (): void => {
    if (waiting) idle.abort();
    else timer.refresh();
  };
  let timer = setTimeout(onIdle, target.idleTimeoutMs);
  const fail = (err: unknown): unknown => upstreamFailure(err, call.provider, signal, idle.signal);
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  let eof = false;
  try {
    let res: Response;
    try {
      res = await fetch(call.url, { method: 'POST', headers: call.headers, body, signal: AbortSignal.any([signal, idle.signal]) });
    } catch (err) {
      throw fail(err);
    }
    // The request (history, images) can be large; the stream can be long. Do not hold on to it.
    body = '';
    timer.refresh();
    if (!res.ok) {
      let text = '';
      try {
        text = (await res.text()).slice(0, ERROR_BODY_MAX);
      } catch (err) {
        throw fail(err);
      }
      throw errorForStatus(call.provider, res.status, text);
    }
    if (res.body === null) throw new ProviderError('PROVIDER_UNAVAILABLE', true, `${call.provider} answered without a body`, res.status);
    reader = res.body.getReader();
    const decoder = new TextDecoder();
    const out: ChatEvent[] = [];
    let failure: unknown;
    // A failure inside a chunk stops parsing but keeps the events before it, so every delta the
    // provider produced before its error still reaches the client.
    const parser = new SseParser((name, data) => {
      if (failure !== undefined || translator.ended) return;
      try {
        translator.event(name, data, out);
      } catch (err) {
        failure = err;
      }
    });
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (translator.ended) return;
        throw fail(err);
      }
      if (chunk.done) {
        eof = true;
        break;
      }
      if (translator.ended) continue;
      timer.refresh();
      try {
        parser.push(decoder.decode(chunk.value, DECODE_STREAM));
      } catch (err) {
        failure ??= err;
      }
      for (let i = 0; i < out.length; i++) {
        waiting = false;
        yield out[i] as ChatEvent;
        waiting = true;
      }
      out.length = 0;
      if (failure !== undefined) throw malformed(failure, call.provider);
      if (translator.ended) {
        // Read on to the end of the body so the connection can be reused, but not for long.
        clearTimeout(timer);
        timer = setTimeout(onIdle, Math.min(END_GRACE_MS, target.idleTimeoutMs));
      }
    }
    if (translator.ended) return;
    try {
      parser.push(decoder.decode());
      parser.end();
    } catch (err) {
      failure ??= err;
    }
    for (let i = 0; i < out.length; i++) {
      waiting = false;
      yield out[i] as ChatEvent;
      waiting = true;
    }
    out.length = 0;
    if (failure !== undefined) throw malformed(failure, call.provider);
    translator.end(out);
    for (let i = 0; i < out.length; i++) {
      waiting = false;
      yield out[i] as ChatEvent;
      waiting = true;
    }
  } finally {
    clearTimeout(timer);
    if (reader !== undefined && !eof) reader.cancel().catch(() => undefined);
  }
}

function upstreamFailure(err: unknown, provider: string, signal: AbortSignal, idle: AbortSignal): unknown {
  if (signal.aborted) return signal.reason;
  if (idle.aborted) return new ProviderError('UPSTREAM_TIMEOUT', true, `${provider} sent nothing for too long`);
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
export function errorForStatus(provider: string, status: number, text: string): ProviderError {
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

export function base64(data: Buffer): string {
  return data.toString('base64');
}

export const MIME: Record<'png' | 'jpeg' | 'webp', string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };
