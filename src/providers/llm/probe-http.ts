// The one HTTP call shape every key probe uses (language-model and market-data providers alike).
import { request, type Dispatcher } from 'undici';

/** Why a probe could not tell whether a key is good; the key is then stored unverified. */
export type ProbeFailure = 'timeout' | 'rate-limited' | 'unavailable' | 'network' | 'unexpected';

export type ProbeAnswer =
  { readonly kind: 'answer'; readonly status: number; readonly body: unknown } | { readonly kind: 'failed'; readonly reason: ProbeFailure };

/**
 * GET with the probe's deadline, through `dispatcher` (the service's pooled keep-alive agent; undici's
 * global one when absent). Redirects are not followed (undici's request follows none): providers
 * answer API calls directly, and a redirect would carry custom key headers (x-api-key,
 * x-goog-api-key) to another origin. The URL and headers carry the key, so nothing here is ever
 * logged or put in an error.
 */
export async function probeGet(url: URL, headers: Record<string, string>, { signal, dispatcher }: ProbeCall): Promise<ProbeAnswer> {
  try {
    const res = await request(url, {
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': 'node', ...headers },
      signal,
      ...(dispatcher ? { dispatcher } : {}),
    });
    const text = await res.body.text();
    let body: unknown;
    try {
      body = text === '' ? undefined : (JSON.parse(text) as unknown);
    } catch {
      body = undefined;
    }
    return { kind: 'answer', status: res.statusCode, body };
  } catch {
    return { kind: 'failed', reason: signal.aborted ? 'timeout' : 'network' };
  }
}

/** What a key probe (language-model or market-data) is called with. */
export interface ProbeOptions {
  /** The provider's base URL (language models: including the version segment; Polygon: its origin; FMP: its `/stable` base). No trailing slash. */
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** The service's upstream agent (pooled keep-alive connections); undici's global one when absent. */
  readonly dispatcher?: Dispatcher;
}

/** How a probe's calls go out: one deadline for the whole probe (every page of it), one agent. */
export interface ProbeCall {
  readonly signal: AbortSignal;
  readonly dispatcher: Dispatcher | undefined;
}

/**
 * Runs a probe's calls under one deadline (every page of it), merged with the caller's own signal.
 * The deadline's timer is cleared when the probe ends: a finished probe leaves nothing scheduled
 * (`AbortSignal.timeout` would keep its timer, and fire it and build its error, for the whole
 * timeout after every probe).
 */
export async function withProbeCall<T>(opts: ProbeOptions, probe: (call: ProbeCall) => Promise<T>): Promise<T> {
  const deadline = new AbortController();
  const abort = (): void => deadline.abort();
  const timer = setTimeout(abort, opts.timeoutMs);
  if (opts.signal?.aborted) abort();
  else opts.signal?.addEventListener('abort', abort, { once: true });
  try {
    return await probe({ signal: deadline.signal, dispatcher: opts.dispatcher });
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', abort);
  }
}

/** How a status that is neither success nor a provider-specific refusal reads. */
export function transientStatus(status: number): ProbeFailure {
  if (status === 429) return 'rate-limited';
  if (status === 408) return 'timeout';
  if (status >= 500) return 'unavailable';
  // 3xx, 404 and friends: the provider did not refuse the key; most likely a misconfigured endpoint.
  return 'unexpected';
}

export function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
