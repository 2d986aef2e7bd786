// The one GET every market read makes, and the pieces both providers' mappings share.
import type { Dispatcher } from 'undici';
import { probeGet } from '../llm/probe-http.ts';
import { MarketDataError } from './types.ts';

export interface ReadCall {
  readonly signal: AbortSignal;
  readonly dispatcher: Dispatcher;
}

export interface ReadAnswer {
  readonly status: number;
  readonly body: unknown;
}

/**
 * GET through the service's agent. A deadline (the signal's reason a TimeoutError) or an unreachable
 * provider is MARKET_DATA_UNAVAILABLE; any other abort rejects with its own reason (the turn is
 * ending). The URL can carry the key (FMP), so no error here ever quotes it.
 */
export async function readJson(url: URL, headers: Record<string, string>, call: ReadCall): Promise<ReadAnswer> {
  const answer = await probeGet(url, headers, call);
  if (answer.kind === 'answer') return answer;
  const { signal } = call;
  if (signal.aborted && !(signal.reason instanceof DOMException && signal.reason.name === 'TimeoutError')) throw signal.reason;
  throw new MarketDataError(
    'MARKET_DATA_UNAVAILABLE',
    signal.aborted ? 'the market-data provider did not answer in time' : 'the market-data provider could not be reached',
  );
}

/** What every provider means by these statuses, whatever the body says. */
export function commonRefusal(status: number): MarketDataError | undefined {
  if (status === 429) return new MarketDataError('MARKET_DATA_RATE_LIMITED', 'the market-data plan’s request limit was reached; try again in a minute', status);
  if (status >= 500 || status === 408) return new MarketDataError('MARKET_DATA_UNAVAILABLE', 'the market-data provider is unavailable right now', status);
  return undefined;
}

export const keyRefused = (status: number): MarketDataError =>
  new MarketDataError('MARKET_DATA_KEY_INVALID', 'the market-data provider refused the stored key; the user should enter a new one', status);
export const notEntitled = (status: number): MarketDataError =>
  new MarketDataError('MARKET_DATA_NOT_ENTITLED', 'the user’s market-data plan does not cover this data', status);
export const unknownSymbol = (symbol: string): MarketDataError => new MarketDataError('UNKNOWN_SYMBOL', `no listed symbol ${symbol}`);
export const unexpected = (status: number): MarketDataError =>
  new MarketDataError('MARKET_DATA_UNAVAILABLE', `the market-data provider gave an unexpected answer (HTTP ${status})`, status);

export function num(x: unknown): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

/** A number the provider uses 0 for when it has none yet (a day's open before the first trade). */
export function positive(x: unknown): number | null {
  const n = num(x);
  return n !== null && n > 0 ? n : null;
}

export function str(x: unknown): string | null {
  return typeof x === 'string' && x !== '' ? x : null;
}

const NEW_YORK = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', timeZoneName: 'longOffset' });
const NEW_YORK_DATE = new Intl.DateTimeFormat('en-CA', { timeZone: 'America/New_York', year: 'numeric', month: '2-digit', day: '2-digit' });

/** Minutes New York is ahead of UTC at `ms` (negative: -300 in winter, -240 in summer). */
function newYorkOffset(ms: number): number {
  const name = NEW_YORK.formatToParts(ms).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /GMT([+-])(\d{2}):(\d{2})/.exec(name);
  return m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : 0;
}

/** `2025-02-04 15:59:00` on a New York wall clock (US exchanges' own time) as an ISO instant, UTC. */
export function newYorkWallClockToIso(local: string): string | null {
  const asUtc = Date.parse(`${local.replace(' ', 'T')}Z`);
  if (Number.isNaN(asUtc)) return null;
  let ms = asUtc - newYorkOffset(asUtc) * 60_000;
  ms = asUtc - newYorkOffset(ms) * 60_000;
  return new Date(ms).toISOString();
}

/** The New York trading date (YYYY-MM-DD) an instant falls on: how a daily bar is named. */
export function newYorkDate(ms: number): string {
  return NEW_YORK_DATE.format(ms);
}
