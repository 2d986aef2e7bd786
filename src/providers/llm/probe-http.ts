// The one HTTP call shape every key probe uses (language-model and market-data providers alike).

/** Why a probe could not tell whether a key is good; the key is then stored unverified. */
export type ProbeFailure = 'timeout' | 'rate-limited' | 'unavailable' | 'network' | 'unexpected';

export type ProbeAnswer =
  | { readonly kind: 'answer'; readonly status: number; readonly body: unknown }
  | { readonly kind: 'failed'; readonly reason: ProbeFailure };

/**
 * GET with the probe's deadline. Redirects are not followed: providers answer API calls directly,
 * and a redirect would carry custom key headers (x-api-key, x-goog-api-key) to another origin.
 * The URL and headers carry the key, so nothing here is ever logged or put in an error.
 */
export async function probeGet(url: URL, headers: Record<string, string>, signal: AbortSignal): Promise<ProbeAnswer> {
  try {
    const res = await fetch(url, { method: 'GET', headers: { accept: 'application/json', ...headers }, redirect: 'manual', signal });
    const text = await res.text();
    let body: unknown;
    try {
      body = text === '' ? undefined : (JSON.parse(text) as unknown);
    } catch {
      body = undefined;
    }
    return { kind: 'answer', status: res.status, body };
  } catch {
    return { kind: 'failed', reason: signal.aborted ? 'timeout' : 'network' };
  }
}

/** A deadline for the whole probe (every page of it), merged with the caller's own signal. */
export function probeDeadline(timeoutMs: number, signal?: AbortSignal): AbortSignal {
  const deadline = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([deadline, signal]) : deadline;
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
