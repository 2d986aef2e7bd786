// Key verification probes for the market-data providers (spec 4.1 rules 2–5).
import type { MarketDataProvider } from '../../config.ts';
import { isRecord, probeGet, transientStatus, withProbeCall, type ProbeCall, type ProbeFailure, type ProbeOptions } from '../llm/probe-http.ts';

export type MarketDataProbeResult =
  { readonly outcome: 'valid' } | { readonly outcome: 'invalid'; readonly status: number } | { readonly outcome: 'transient'; readonly reason: ProbeFailure };

export async function probeMarketDataKey(provider: MarketDataProvider, apiKey: string, opts: ProbeOptions): Promise<MarketDataProbeResult> {
  return withProbeCall(opts, (call) => (provider === 'polygon' ? probePolygon(apiKey, opts.baseUrl, call) : probeFmp(apiKey, opts.baseUrl, call)));
}

/** Polygon's market status: available on every plan, so a refusal is about the key. */
async function probePolygon(apiKey: string, base: string, call: ProbeCall): Promise<MarketDataProbeResult> {
  const url = new URL(`${base}/v1/marketstatus/now`);
  // Polygon takes the key as a bearer token too: a header stays out of proxy and access logs.
  const answer = await probeGet(url, { authorization: `Bearer ${apiKey}` }, call);
  if (answer.kind === 'failed') return { outcome: 'transient', reason: answer.reason };
  const { status, body } = answer;
  if (status === 401 || status === 403) return { outcome: 'invalid', status };
  if (status >= 200 && status < 300 && isRecord(body)) return { outcome: 'valid' };
  return { outcome: 'transient', reason: status >= 200 && status < 300 ? 'unexpected' : transientStatus(status) };
}

/**
 * FMP answers refusals with an `Error Message` body, sometimes under a 200. Such a body is a
 * refusal whatever the status, except a usage-limit message (a quota, not a bad key) and 429/5xx,
 * which are transient whatever the body says.
 */
async function probeFmp(apiKey: string, base: string, call: ProbeCall): Promise<MarketDataProbeResult> {
  const url = new URL(`${base}/quote`);
  url.searchParams.set('symbol', 'AAPL');
  url.searchParams.set('apikey', apiKey);
  const answer = await probeGet(url, {}, call);
  if (answer.kind === 'failed') return { outcome: 'transient', reason: answer.reason };
  const { status, body } = answer;
  if (status === 429 || status >= 500) return { outcome: 'transient', reason: transientStatus(status) };
  const message = isRecord(body) ? body['Error Message'] : undefined;
  if (typeof message === 'string') {
    return /limit reach/i.test(message) ? { outcome: 'transient', reason: 'rate-limited' } : { outcome: 'invalid', status };
  }
  if (status === 401 || status === 403) return { outcome: 'invalid', status };
  if (status >= 200 && status < 300 && Array.isArray(body)) return { outcome: 'valid' };
  return { outcome: 'transient', reason: status >= 200 && status < 300 ? 'unexpected' : transientStatus(status) };
}
