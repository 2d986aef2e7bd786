// Financial Modeling Prep's `stable` API: the four market reads on the user's key, which FMP takes
// only as the `apikey` query parameter (so a URL here is never logged or quoted).
import { isRecord } from '../llm/probe-http.ts';
import { commonRefusal, keyRefused, newYorkWallClockToIso, notEntitled, num, readJson, str, unexpected, unknownSymbol, type ReadCall } from './http.ts';
import {
  type MarketDataError,
  MAX_BARS,
  MAX_SYMBOL_MATCHES,
  type Bar,
  type BarInterval,
  type MarketStatus,
  type PriceHistory,
  type Quote,
  type SymbolMatch,
} from './types.ts';

/** The US exchanges whose hours make up "the market". */
const US_EXCHANGES = ['NYSE', 'NASDAQ', 'AMEX'];

export class FmpReads {
  readonly #base: string;
  constructor(baseUrl: string) {
    this.#base = baseUrl;
  }

  /**
   * FMP answers refusals with `{"Error Message": …}`, sometimes under a 200: an invalid key, a
   * "Restricted/Exclusive Endpoint" outside the plan (402, or 403), "Limit Reach" (a quota).
   */
  async #get(path: string, query: Record<string, string>, apiKey: string, call: ReadCall): Promise<unknown> {
    const url = new URL(`${this.#base}${path}`);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    url.searchParams.set('apikey', apiKey);
    const { status, body } = await readJson(url, {}, call);
    const message = isRecord(body) && typeof body['Error Message'] === 'string' ? body['Error Message'] : undefined;
    if (message !== undefined && /limit reach/i.test(message)) throw commonRefusal(429) as MarketDataError;
    const common = commonRefusal(status);
    if (common) throw common;
    if (status === 402 || (message !== undefined && /restricted|exclusive|premium|subscription/i.test(message))) throw notEntitled(status);
    if (status === 401 || status === 403 || message !== undefined) throw keyRefused(status);
    if (status < 200 || status >= 300 || body === undefined) throw unexpected(status);
    return body;
  }

  /**
   * FMP's quote names the exchange but not the currency or the session: the company profile
   * (`currency`) and the exchanges' hours (`isMarketOpen`, `timezone`; regular hours only) are asked at
   * the same time. A quote whose profile or hours could not be read is still a quote (those fields null).
   */
  async quote(apiKey: string, symbol: string, call: ReadCall): Promise<Quote> {
    const extra = (path: string, query: Record<string, string>) => this.#get(path, query, apiKey, call).catch(() => undefined);
    const [body, profile, hours] = await Promise.all([
      this.#get('/quote', { symbol }, apiKey, call),
      extra('/profile', { symbol }),
      extra('/all-exchange-market-hours', {}),
    ]);
    const row: unknown = Array.isArray(body) ? body[0] : undefined;
    const price = isRecord(row) ? num(row['price']) : null;
    if (!isRecord(row) || price === null) throw unknownSymbol(symbol);
    const ts = num(row['timestamp']);
    const company: unknown = Array.isArray(profile) ? profile[0] : undefined;
    const exchange = str(row['exchange']);
    const venue: unknown = Array.isArray(hours) ? hours.find((h) => isRecord(h) && exchange !== null && h['exchange'] === exchange) : undefined;
    const open = isRecord(venue) && typeof venue['isMarketOpen'] === 'boolean' ? venue['isMarketOpen'] : undefined;
    return {
      symbol: str(row['symbol']) ?? symbol,
      price,
      change: num(row['change']),
      changePercent: num(row['changePercentage']),
      open: num(row['open']),
      high: num(row['dayHigh']),
      low: num(row['dayLow']),
      volume: num(row['volume']),
      previousClose: num(row['previousClose']),
      asOf: new Date(ts === null ? Date.now() : ts * 1000).toISOString(),
      currency: isRecord(company) ? (str(company['currency'])?.toUpperCase() ?? null) : null,
      marketState: open === undefined ? null : open ? 'open' : 'closed',
      exchangeTimezone: isRecord(venue) ? str(venue['timezone']) : null,
    };
  }

  async priceHistory(apiKey: string, q: { symbol: string; interval: BarInterval; from: string; to: string }, call: ReadCall): Promise<PriceHistory> {
    const daily = q.interval === '1day';
    const body = await this.#get(
      daily ? '/historical-price-eod/full' : `/historical-chart/${q.interval}`,
      { symbol: q.symbol, from: q.from, to: q.to },
      apiKey,
      call,
    );
    const bars: Bar[] = [];
    for (const r of Array.isArray(body) ? body : []) {
      if (!isRecord(r) || typeof r['date'] !== 'string') continue;
      // Daily rows are dates; intraday rows New York wall-clock times (`2025-02-04 15:59:00`).
      const t = daily ? r['date'].slice(0, 10) : newYorkWallClockToIso(r['date']);
      const [o, h, l, c] = [num(r['open']), num(r['high']), num(r['low']), num(r['close'])];
      if (t === null || o === null || h === null || l === null || c === null) continue;
      bars.push({ t, open: o, high: h, low: l, close: c, volume: num(r['volume']) });
    }
    // FMP lists newest first.
    bars.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0));
    return { symbol: q.symbol, interval: q.interval, bars: bars.slice(-MAX_BARS), truncated: bars.length > MAX_BARS };
  }

  async marketStatus(apiKey: string, call: ReadCall): Promise<MarketStatus> {
    const body = await this.#get('/all-exchange-market-hours', {}, apiKey, call);
    const exchanges: Record<string, string> = {};
    for (const r of Array.isArray(body) ? body : []) {
      if (!isRecord(r) || typeof r['exchange'] !== 'string' || !US_EXCHANGES.includes(r['exchange'])) continue;
      if (typeof r['isMarketOpen'] === 'boolean') exchanges[r['exchange'].toLowerCase()] = r['isMarketOpen'] ? 'open' : 'closed';
    }
    // FMP reports regular hours only: pre- and after-market read as closed.
    const open = exchanges['nyse'] === 'open' || exchanges['nasdaq'] === 'open';
    return { market: open ? 'open' : 'closed', asOf: new Date().toISOString(), exchanges: Object.keys(exchanges).length > 0 ? exchanges : null };
  }

  /** Symbol search matches tickers; a name ("apple") is looked up by name when no ticker matched. */
  async searchSymbols(apiKey: string, query: string, call: ReadCall): Promise<SymbolMatch[]> {
    const limit = String(MAX_SYMBOL_MATCHES);
    let rows = await this.#get('/search-symbol', { query, limit }, apiKey, call);
    if (!Array.isArray(rows) || rows.length === 0) rows = await this.#get('/search-name', { query, limit }, apiKey, call);
    return (Array.isArray(rows) ? rows : [])
      .filter(isRecord)
      .map((r) => ({ symbol: str(r['symbol']) ?? '', name: str(r['name']) ?? '', exchange: str(r['exchange']), type: null }))
      .filter((m) => m.symbol !== '')
      .slice(0, MAX_SYMBOL_MATCHES);
  }
}
