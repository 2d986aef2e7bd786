// Polygon's REST API (documented today under its new name, Massive): the four market reads on the
// user's key, sent as a bearer token (a header stays out of proxy and access logs).
import { isRecord } from '../llm/probe-http.ts';
import { commonRefusal, keyRefused, newYorkDate, notEntitled, num, positive, readJson, str, unexpected, unknownSymbol, type ReadCall } from './http.ts';
import {
  MAX_BARS,
  MAX_SYMBOL_MATCHES,
  type Bar,
  type BarInterval,
  type MarketState,
  type MarketStatus,
  type PriceHistory,
  type Quote,
  type SymbolMatch,
} from './types.ts';

/**
 * The session `/v1/marketstatus/now` describes: `market` (`open`, `extended-hours`, `closed`) with its
 * `earlyHours` / `afterHours` flags telling pre-market from after-hours.
 */
function sessionOf(body: Record<string, unknown>): MarketState | null {
  if (body['market'] === 'open') return 'open';
  if (body['earlyHours'] === true) return 'pre-market';
  if (body['afterHours'] === true) return 'after-hours';
  return body['market'] === 'closed' ? 'closed' : null;
}

const SPANS: Readonly<Record<BarInterval, readonly [number, string]>> = {
  '1min': [1, 'minute'],
  '5min': [5, 'minute'],
  '15min': [15, 'minute'],
  '1hour': [1, 'hour'],
  '1day': [1, 'day'],
};

export class PolygonReads {
  readonly #base: string;
  constructor(baseUrl: string) {
    this.#base = baseUrl;
  }

  async #get(path: string, query: Record<string, string>, apiKey: string, call: ReadCall, symbol?: string): Promise<Record<string, unknown>> {
    const url = new URL(`${this.#base}${path}`);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const { status, body } = await readJson(url, { authorization: `Bearer ${apiKey}` }, call);
    const common = commonRefusal(status);
    if (common) throw common;
    if (status === 401) throw keyRefused(status);
    // 403 NOT_AUTHORIZED "You are not entitled to this data": the plan, not the key.
    if (status === 403)
      throw isRecord(body) && (body['status'] === 'NOT_AUTHORIZED' || /entitled|plan/i.test(String(body['message'] ?? '')))
        ? notEntitled(status)
        : keyRefused(status);
    if (status === 404 && symbol !== undefined) throw unknownSymbol(symbol);
    if (status < 200 || status >= 300 || !isRecord(body)) throw unexpected(status);
    return body;
  }

  /**
   * The US stocks snapshot: its prices are US dollars and its exchanges keep New York time. The
   * snapshot does not carry the session, so the market status is asked at the same time; a quote
   * whose status could not be read is still a quote (marketState null).
   */
  async quote(apiKey: string, symbol: string, call: ReadCall): Promise<Quote> {
    const session = this.#get('/v1/marketstatus/now', {}, apiKey, call).then(sessionOf, () => null);
    const body = await this.#get(`/v2/snapshot/locale/us/markets/stocks/tickers/${encodeURIComponent(symbol)}`, {}, apiKey, call, symbol);
    const t = body['ticker'];
    if (!isRecord(t)) throw unknownSymbol(symbol);
    const day = isRecord(t['day']) ? t['day'] : {};
    const prev = isRecord(t['prevDay']) ? t['prevDay'] : {};
    const last = isRecord(t['lastTrade']) ? t['lastTrade'] : {};
    const min = isRecord(t['min']) ? t['min'] : {};
    const price = positive(last['p']) ?? positive(min['c']) ?? positive(day['c']) ?? positive(prev['c']);
    if (price === null) throw unknownSymbol(symbol);
    // `updated` and trade times are Unix nanoseconds.
    const updated = num(t['updated']) ?? num(last['t']);
    return {
      symbol: str(t['ticker']) ?? symbol,
      price,
      change: num(t['todaysChange']),
      changePercent: num(t['todaysChangePerc']),
      open: positive(day['o']),
      high: positive(day['h']),
      low: positive(day['l']),
      volume: num(day['v']),
      previousClose: positive(prev['c']),
      asOf: new Date(updated === null ? Date.now() : Math.floor(updated / 1e6)).toISOString(),
      currency: 'USD',
      marketState: await session,
      exchangeTimezone: 'America/New_York',
    };
  }

  async priceHistory(apiKey: string, q: { symbol: string; interval: BarInterval; from: string; to: string }, call: ReadCall): Promise<PriceHistory> {
    const [multiplier, timespan] = SPANS[q.interval];
    const path = `/v2/aggs/ticker/${encodeURIComponent(q.symbol)}/range/${multiplier}/${timespan}/${q.from}/${q.to}`;
    // `limit` counts the base aggregates behind the bars; 50000 (the maximum) covers a month of minutes.
    const body = await this.#get(path, { adjusted: 'true', sort: 'asc', limit: '50000' }, apiKey, call, q.symbol);
    const rows = Array.isArray(body['results']) ? body['results'] : [];
    const bars: Bar[] = [];
    for (const r of rows) {
      if (!isRecord(r)) continue;
      const t = num(r['t']);
      const [o, h, l, c] = [num(r['o']), num(r['h']), num(r['l']), num(r['c'])];
      if (t === null || o === null || h === null || l === null || c === null) continue;
      bars.push({ t: q.interval === '1day' ? newYorkDate(t) : new Date(t).toISOString(), open: o, high: h, low: l, close: c, volume: num(r['v']) });
    }
    const truncated = bars.length > MAX_BARS || typeof body['next_url'] === 'string';
    return { symbol: q.symbol, interval: q.interval, bars: bars.slice(-MAX_BARS), truncated };
  }

  async marketStatus(apiKey: string, call: ReadCall): Promise<MarketStatus> {
    const body = await this.#get('/v1/marketstatus/now', {}, apiKey, call);
    const market = body['market'] === 'open' || body['market'] === 'extended-hours' ? body['market'] : 'closed';
    const exchanges = isRecord(body['exchanges'])
      ? Object.fromEntries(Object.entries(body['exchanges']).filter((e): e is [string, string] => typeof e[1] === 'string'))
      : null;
    // serverTime is New York time with its offset (`2020-11-10T17:37:37-05:00`).
    const server = typeof body['serverTime'] === 'string' ? Date.parse(body['serverTime']) : Number.NaN;
    return { market, asOf: new Date(Number.isNaN(server) ? Date.now() : server).toISOString(), exchanges };
  }

  async searchSymbols(apiKey: string, query: string, call: ReadCall): Promise<SymbolMatch[]> {
    const body = await this.#get('/v3/reference/tickers', { search: query, active: 'true', market: 'stocks', limit: String(MAX_SYMBOL_MATCHES) }, apiKey, call);
    const rows = Array.isArray(body['results']) ? body['results'] : [];
    return rows
      .filter(isRecord)
      .map((r) => ({ symbol: str(r['ticker']) ?? '', name: str(r['name']) ?? '', exchange: str(r['primary_exchange']), type: str(r['type']) }))
      .filter((m) => m.symbol !== '')
      .slice(0, MAX_SYMBOL_MATCHES);
  }
}
