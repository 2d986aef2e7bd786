// Fakes of the two market-data providers, in their real wire shapes: Polygon (REST API, documented
// today as Massive) and Financial Modeling Prep (`stable` API). Each answers the key probe and the four
// market reads the advisor's tools make, from a small fixed universe of US symbols, and every refusal
// the providers give (bad key, plan not entitled, rate limit, outage, no answer).
import type { ServerResponse } from 'node:http';
import type { FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
import { bearer, keyRing, probeStatus, randomId, sendJson, sleep, startFake } from './http-fake.ts';

/**
 * How the market reads answer (the key probe keeps its own `setProbe`):
 * - `unauthorized`: the key is refused (401);
 * - `forbidden-key`: a 403 that refuses the key itself (FMP's "Invalid API KEY" under 403);
 * - `not-entitled`: the plan does not cover the data (Polygon 403 NOT_AUTHORIZED, FMP 402 "Restricted Endpoint");
 * - `rate-limited`: 429; `server-error`: 500/502; `stall`: never answers;
 * - `error-under-200`: FMP's habit of an `Error Message` body under HTTP 200 ("Limit Reach").
 */
export type MarketBehaviour = 'ok' | 'unauthorized' | 'forbidden-key' | 'not-entitled' | 'rate-limited' | 'server-error' | 'stall' | 'error-under-200';

export interface MarketDataFake extends FakeServer, KeyRing {
  /** Bare origin, e.g. `http://127.0.0.1:40123` (for FMP, `url` is this plus `/stable`). */
  origin: string;
  setProbe(b: ProbeBehaviour): void;
  setMarket(b: MarketBehaviour): void;
  /** Delay before every market answer (concurrency and deadline tests). */
  setLatency(ms: number): void;
  /** The US market's session the fake reports (default `open`; FMP reports regular hours only). */
  setSession(s: 'open' | 'pre-market' | 'after-hours' | 'closed'): void;
}

/** The fixed universe both fakes know. */
export const MARKET_FIXTURES = {
  AAPL: { name: 'Apple Inc.', exchange: 'XNAS', fmpExchange: 'NASDAQ', type: 'CS', price: 232.8, prevClose: 231.82 },
  MSFT: { name: 'Microsoft Corporation', exchange: 'XNAS', fmpExchange: 'NASDAQ', type: 'CS', price: 415.1, prevClose: 417.3 },
  NVDA: { name: 'NVIDIA Corporation', exchange: 'XNAS', fmpExchange: 'NASDAQ', type: 'CS', price: 131.6, prevClose: 128.9 },
  'BRK.B': { name: 'Berkshire Hathaway Inc. Class B', exchange: 'XNYS', fmpExchange: 'NYSE', type: 'CS', price: 468.2, prevClose: 466.05 },
  SPY: { name: 'SPDR S&P 500 ETF Trust', exchange: 'ARCX', fmpExchange: 'AMEX', type: 'ETF', price: 598.4, prevClose: 596.7 },
} as const;
type Fixture = (typeof MARKET_FIXTURES)[keyof typeof MARKET_FIXTURES];

const fixture = (symbol: string | undefined): Fixture | undefined =>
  symbol !== undefined && Object.hasOwn(MARKET_FIXTURES, symbol) ? MARKET_FIXTURES[symbol as keyof typeof MARKET_FIXTURES] : undefined;

const round2 = (x: number): number => Math.round(x * 100) / 100;

// --- US Eastern time, written out (not borrowed from the service) so the fakes check its conversions ---

/** Day of month of the n-th Sunday of a month (UTC calendar arithmetic). */
function nthSunday(year: number, month: number, n: number): number {
  const first = new Date(Date.UTC(year, month, 1)).getUTCDay();
  return 1 + ((7 - first) % 7) + (n - 1) * 7;
}

/** UTC offset of New York in hours on a local calendar date: -4 from the second Sunday of March to the first Sunday of November. */
function newYorkOffsetHours(year: number, month: number, day: number): number {
  const start = Date.UTC(year, 2, nthSunday(year, 2, 2));
  const end = Date.UTC(year, 10, nthSunday(year, 10, 1));
  const d = Date.UTC(year, month, day);
  return d >= start && d < end ? -4 : -5;
}

/** A New York wall-clock minute on a date as Unix ms. */
function newYorkMs(date: string, minuteOfDay: number): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return Date.UTC(y, m - 1, d, 0, minuteOfDay) - newYorkOffsetHours(y, m - 1, d) * 3_600_000;
}

const pad = (n: number): string => String(n).padStart(2, '0');

/** Weekdays from `from` to `to` (YYYY-MM-DD, both included), at most ~3 years. */
function tradingDays(from: string, to: string): string[] {
  const days: string[] = [];
  const start = Date.parse(`${from}T00:00:00Z`);
  const end = Date.parse(`${to}T00:00:00Z`);
  if (Number.isNaN(start) || Number.isNaN(end)) return days;
  for (let t = start; t <= end && days.length < 800; t += 86_400_000) {
    const dow = new Date(t).getUTCDay();
    if (dow !== 0 && dow !== 6) days.push(new Date(t).toISOString().slice(0, 10));
  }
  return days;
}

interface FakeBar {
  /** Start of the bar, Unix ms. */
  readonly t: number;
  /** The bar's New York wall-clock date and time (`2025-02-04 15:59:00`). */
  readonly local: string;
  readonly date: string;
  readonly o: number;
  readonly h: number;
  readonly l: number;
  readonly c: number;
  readonly v: number;
}

/** Deterministic bars over regular hours (09:30–16:00 New York), oldest first. */
function bars(f: Fixture, stepMinutes: number | 'day', from: string, to: string): FakeBar[] {
  const out: FakeBar[] = [];
  let i = 0;
  const bar = (t: number, local: string, date: string): FakeBar => {
    const o = round2(f.price * (1 + 0.01 * Math.sin(i / 7)));
    const c = round2(f.price * (1 + 0.01 * Math.sin((i + 1) / 7)));
    i++;
    return { t, local, date, o, c, h: round2(Math.max(o, c) + 0.25), l: round2(Math.min(o, c) - 0.25), v: 1000 + ((i * 7919) % 5000) };
  };
  for (const date of tradingDays(from, to)) {
    if (stepMinutes === 'day') {
      out.push(bar(newYorkMs(date, 0), `${date} 00:00:00`, date));
      continue;
    }
    for (let m = 9 * 60 + 30; m < 16 * 60; m += stepMinutes) {
      out.push(bar(newYorkMs(date, m), `${date} ${pad(Math.floor(m / 60))}:${pad(m % 60)}:00`, date));
    }
  }
  return out;
}

/** What a test scripts on a market fake: the probe's answer, the market reads' answer, a delay before each. */
interface Script {
  probe: ProbeBehaviour;
  market: MarketBehaviour;
  latency: number;
  session: 'open' | 'pre-market' | 'after-hours' | 'closed';
}

type Refusal = Exclude<MarketBehaviour, 'ok' | 'stall'>;

/**
 * The part of every answer both fakes share: the scripted delay, then a scripted market refusal
 * (or silence), then for the key probe its own scripted answer. True when that answered (or stalls).
 */
async function scriptedAnswer(
  script: Script,
  res: ServerResponse,
  isProbe: boolean,
  signal: AbortSignal,
  refuse: (res: ServerResponse, b: Refusal) => void,
  fail: (res: ServerResponse, status: number) => void,
): Promise<boolean> {
  await sleep(script.latency, signal);
  if (script.market !== 'ok') {
    if (script.market !== 'stall') refuse(res, script.market);
    return true;
  }
  if (!isProbe || script.probe === 'ok') return false;
  const forced = probeStatus(script.probe, 500);
  if (forced !== undefined) fail(res, forced);
  return true;
}

function scriptControls(script: Script): Pick<MarketDataFake, 'setProbe' | 'setMarket' | 'setLatency' | 'setSession'> {
  return {
    setProbe: (b) => void (script.probe = b),
    setMarket: (b) => void (script.market = b),
    setLatency: (ms) => void (script.latency = ms),
    setSession: (s) => void (script.session = s),
  };
}

// --- Polygon ---------------------------------------------------------------------------------------

const POLYGON_SPANS: Readonly<Record<string, number | 'day'>> = { minute: 1, hour: 60, day: 'day' };

/** `url` is the origin; the key travels as `?apiKey=` or a bearer token. */
export async function startPolygonFake(): Promise<MarketDataFake> {
  const keys = keyRing('pk-valid-polygon');
  const script: Script = { probe: 'ok', market: 'ok', latency: 0, session: 'open' };
  const fail = (res: ServerResponse, status: number, text?: string): void => {
    const request_id = randomId('', 16);
    // Polygon puts the reason in `error` for auth/limit failures and in `message` for entitlement.
    const body =
      status === 403
        ? { status: 'NOT_AUTHORIZED', request_id, message: 'You are not entitled to this data. Please upgrade your plan at https://polygon.io/pricing' }
        : status === 429
          ? {
              status: 'ERROR',
              request_id,
              error: "You've exceeded the maximum requests per minute, please wait or upgrade your subscription to continue. https://polygon.io/pricing",
            }
          : status === 404
            ? { status: 'NOT_FOUND', request_id, message: text ?? 'Route not found' }
            : { status: 'ERROR', request_id, error: text ?? (status >= 500 ? 'Internal server error' : 'Unknown API Key') };
    sendJson(res, status, body, status === 429 ? { 'retry-after': '1' } : {});
  };
  const refuse = (res: ServerResponse, b: Refusal): void => {
    if (b === 'unauthorized' || b === 'forbidden-key' || b === 'error-under-200') return fail(res, 401);
    if (b === 'not-entitled') return fail(res, 403);
    if (b === 'rate-limited') return fail(res, 429);
    return fail(res, 500);
  };
  const ok = (res: ServerResponse, body: Record<string, unknown>): void => sendJson(res, 200, { ...body, status: 'OK', request_id: randomId('', 16) });

  const fake = await startFake(async (req, res) => {
    if (req.method !== 'GET') return fail(res, 404);
    const isProbe = req.path === '/v1/marketstatus/now';
    if (await scriptedAnswer(script, res, isProbe, fake.signal, refuse, fail)) return;
    const key = req.query['apiKey'] ?? bearer(req);
    if (key === undefined) return fail(res, 401, 'API Key was not provided');
    if (!keys.isValid(key)) return fail(res, 401);
    if (isProbe) return sendJson(res, 200, marketStatus(script.session));

    let m = /^\/v2\/snapshot\/locale\/us\/markets\/stocks\/tickers\/([^/]+)$/.exec(req.path);
    if (m) {
      const symbol = decodeURIComponent(m[1] ?? '');
      const f = fixture(symbol);
      if (!f) return fail(res, 404, 'Ticker not found.');
      return ok(res, { ticker: snapshot(symbol, f) });
    }
    m = /^\/v2\/aggs\/ticker\/([^/]+)\/range\/(\d+)\/(minute|hour|day)\/(\d{4}-\d{2}-\d{2})\/(\d{4}-\d{2}-\d{2})$/.exec(req.path);
    if (m) {
      const [, rawSymbol, mult, span, from, to] = m as unknown as [string, string, string, string, string, string];
      const symbol = decodeURIComponent(rawSymbol);
      const f = fixture(symbol);
      const base = POLYGON_SPANS[span] ?? 1;
      const step = base === 'day' ? 'day' : base * Number(mult);
      let rows = f ? bars(f, step, from, to) : [];
      if (req.query['sort'] === 'desc') rows = rows.reverse();
      const limit = Math.min(Number(req.query['limit'] ?? 5000), 50_000);
      const results = rows.slice(0, limit).map((b, n) => ({ v: b.v, vw: round2((b.o + b.c) / 2), o: b.o, c: b.c, h: b.h, l: b.l, t: b.t, n: 10 + n }));
      const body: Record<string, unknown> = {
        ticker: symbol,
        queryCount: results.length,
        resultsCount: results.length,
        adjusted: req.query['adjusted'] !== 'false',
      };
      if (results.length > 0) Object.assign(body, { results, count: results.length });
      if (rows.length > limit) body['next_url'] = `${fake.url}/v2/aggs/ticker/${rawSymbol}/range/${mult}/${span}/${from}/${to}?cursor=${randomId('', 8)}`;
      return ok(res, body);
    }
    if (req.path === '/v3/reference/tickers') {
      const q = (req.query['search'] ?? '').toLowerCase();
      const limit = Number(req.query['limit'] ?? 100);
      const results = Object.entries(MARKET_FIXTURES)
        .filter(([s, f]) => q !== '' && (s.toLowerCase().includes(q) || f.name.toLowerCase().includes(q)))
        .slice(0, limit)
        .map(([s, f]) => ({
          ticker: s,
          name: f.name,
          market: 'stocks',
          locale: 'us',
          primary_exchange: f.exchange,
          type: f.type,
          active: true,
          currency_name: 'usd',
          last_updated_utc: '2025-01-02T00:00:00Z',
        }));
      return ok(res, { results, count: results.length });
    }
    fail(res, 404);
  });
  return {
    ...fake,
    ...keys,
    origin: fake.url,
    ...scriptControls(script),
  };
}

function snapshot(symbol: string, f: Fixture): Record<string, unknown> {
  const nowNs = Date.now() * 1e6;
  const change = round2(f.price - f.prevClose);
  return {
    ticker: symbol,
    todaysChangePerc: Math.round((change / f.prevClose) * 1e6) / 1e4,
    todaysChange: change,
    updated: nowNs,
    day: { o: round2(f.prevClose * 1.001), h: round2(f.price + 1.2), l: round2(f.prevClose - 1.1), c: f.price, v: 44489128, vw: round2(f.price - 0.3) },
    min: {
      av: 44489128,
      t: Date.now() - 60_000,
      n: 812,
      o: round2(f.price - 0.05),
      h: round2(f.price + 0.04),
      l: round2(f.price - 0.08),
      c: f.price,
      v: 120_331,
      vw: f.price,
    },
    prevDay: {
      o: round2(f.prevClose - 0.7),
      h: round2(f.prevClose + 1.3),
      l: round2(f.prevClose - 1.9),
      c: f.prevClose,
      v: 51_222_917,
      vw: round2(f.prevClose - 0.2),
    },
    lastQuote: { P: round2(f.price + 0.01), S: 2, p: f.price, s: 3, t: nowNs - 1e9 },
    lastTrade: { c: [14, 41], i: '71675577320245', p: f.price, s: 100, t: nowNs - 2e9, x: 4 },
  };
}

/** Polygon's `/v1/marketstatus/now`: `market` is `extended-hours` before and after the session, told apart by `earlyHours` / `afterHours`. */
function marketStatus(session: Script['session']): unknown {
  const market = session === 'open' ? 'open' : session === 'closed' ? 'closed' : 'extended-hours';
  const exchange = session === 'open' ? 'open' : session === 'closed' ? 'closed' : 'extended-hours';
  return {
    afterHours: session === 'after-hours',
    currencies: { crypto: 'open', fx: 'open' },
    earlyHours: session === 'pre-market',
    exchanges: { nasdaq: exchange, nyse: exchange, otc: exchange },
    indicesGroups: {
      s_and_p: 'open',
      societe_generale: 'open',
      msci: 'open',
      ftse_russell: 'open',
      mstar: 'open',
      mstarc: 'open',
      cccy: 'open',
      cgi: 'open',
      nasdaq: 'open',
      dow_jones: 'open',
    },
    market,
    serverTime: new Date().toISOString().replace(/\.\d{3}Z$/, '-00:00'),
  };
}

// --- Financial Modeling Prep -----------------------------------------------------------------------

const FMP_MESSAGES = {
  invalidKey:
    'Invalid API KEY. Feel free to create a Free API Key or visit https://site.financialmodelingprep.com/faqs?search=why-is-my-api-key-invalid for more information.',
  restricted:
    'Restricted Endpoint: This endpoint is not available under your current subscription agreement, please visit our subscription page to upgrade your plan or contact us at https://site.financialmodelingprep.com/developer/docs/pricing',
  limit: 'Limit Reach . Please upgrade your plan or visit our documentation for more details at https://site.financialmodelingprep.com/developer/docs/pricing ',
} as const;

const FMP_INTRADAY: Readonly<Record<string, number>> = { '1min': 1, '5min': 5, '15min': 15, '30min': 30, '1hour': 60, '4hour': 240 };

/** `url` is the origin plus `/stable`; the key travels as `?apikey=`. */
export async function startFmpFake(): Promise<MarketDataFake> {
  const keys = keyRing('fmp-valid');
  const script: Script = { probe: 'ok', market: 'ok', latency: 0, session: 'open' };
  const fail = (res: ServerResponse, status: number): void => {
    const message =
      status === 401 || status === 400
        ? FMP_MESSAGES.invalidKey
        : status === 402 || status === 403
          ? FMP_MESSAGES.restricted
          : status === 429
            ? FMP_MESSAGES.limit
            : status === 404
              ? 'Not found'
              : 'Internal Server Error';
    sendJson(res, status, { 'Error Message': message });
  };
  const refuse = (res: ServerResponse, b: Refusal): void => {
    if (b === 'unauthorized') return fail(res, 401);
    if (b === 'forbidden-key') return sendJson(res, 403, { 'Error Message': FMP_MESSAGES.invalidKey });
    if (b === 'not-entitled') return fail(res, 402);
    if (b === 'rate-limited') return fail(res, 429);
    if (b === 'error-under-200') return sendJson(res, 200, { 'Error Message': FMP_MESSAGES.limit });
    return fail(res, 502);
  };
  const fake = await startFake(async (req: RecordedRequest, res) => {
    if (req.method !== 'GET' || !req.path.startsWith('/stable/')) return fail(res, 404);
    const path = req.path.slice('/stable'.length);
    const isProbe = path === '/quote';
    if (await scriptedAnswer(script, res, isProbe, fake.signal, refuse, fail)) return;
    if (!keys.isValid(req.query['apikey'])) return fail(res, 401);
    const symbol = req.query['symbol'];
    const f = fixture(symbol);

    if (path === '/quote') return sendJson(res, 200, f && symbol !== undefined ? [fmpQuote(symbol, f)] : []);
    if (path === '/profile') return sendJson(res, 200, f && symbol !== undefined ? [fmpProfile(symbol, f)] : []);
    if (path === '/historical-price-eod/full' || path.startsWith('/historical-chart/')) {
      const daily = path === '/historical-price-eod/full';
      const step = daily ? 'day' : FMP_INTRADAY[path.slice('/historical-chart/'.length)];
      if (step === undefined) return fail(res, 404);
      const today = new Date().toISOString().slice(0, 10);
      const rows = f ? bars(f, step, req.query['from'] ?? today, req.query['to'] ?? today) : [];
      // FMP lists newest first; daily rows carry the symbol and the day's change.
      const out = rows.reverse().map((b) =>
        daily
          ? {
              symbol,
              date: b.date,
              open: b.o,
              high: b.h,
              low: b.l,
              close: b.c,
              volume: b.v,
              change: round2(b.c - b.o),
              changePercent: round2(((b.c - b.o) / b.o) * 100),
              vwap: round2((b.o + b.c) / 2),
            }
          : { date: b.local, open: b.o, low: b.l, high: b.h, close: b.c, volume: b.v },
      );
      return sendJson(res, 200, out);
    }
    if (path === '/all-exchange-market-hours') {
      const hours = (exchange: string, name: string) => ({
        exchange,
        name,
        openingHour: '09:30 AM -05:00',
        closingHour: '04:00 PM -05:00',
        timezone: 'America/New_York',
        isMarketOpen: script.session === 'open',
      });
      return sendJson(res, 200, [
        hours('NYSE', 'New York Stock Exchange'),
        hours('NASDAQ', 'NASDAQ'),
        hours('AMEX', 'New York Stock Exchange Arca'),
        {
          exchange: 'LSE',
          name: 'London Stock Exchange',
          openingHour: '08:00 AM +00:00',
          closingHour: '04:30 PM +00:00',
          timezone: 'Europe/London',
          isMarketOpen: false,
        },
      ]);
    }
    if (path === '/search-symbol' || path === '/search-name') {
      const q = (req.query['query'] ?? '').toLowerCase();
      const bySymbol = path === '/search-symbol';
      const limit = Number(req.query['limit'] ?? 50);
      const out = Object.entries(MARKET_FIXTURES)
        .filter(([s, x]) => q !== '' && (bySymbol ? s.toLowerCase().startsWith(q) : x.name.toLowerCase().includes(q)))
        .slice(0, limit)
        .map(([s, x]) => ({
          symbol: s,
          name: x.name,
          currency: 'USD',
          exchangeFullName: x.fmpExchange === 'NASDAQ' ? 'NASDAQ Global Select' : x.fmpExchange,
          exchange: x.fmpExchange,
        }));
      return sendJson(res, 200, out);
    }
    fail(res, 404);
  });
  return {
    ...fake,
    ...keys,
    url: `${fake.url}/stable`,
    origin: fake.url,
    ...scriptControls(script),
  };
}

function fmpQuote(symbol: string, f: Fixture): unknown {
  const change = round2(f.price - f.prevClose);
  return {
    symbol,
    name: f.name,
    price: f.price,
    changePercentage: Math.round((change / f.prevClose) * 1e6) / 1e4,
    change,
    volume: 44489128,
    dayLow: round2(f.prevClose - 1.1),
    dayHigh: round2(f.price + 1.2),
    yearHigh: round2(f.price * 1.12),
    yearLow: round2(f.price * 0.7),
    marketCap: 3500823120000,
    priceAvg50: round2(f.price * 1.03),
    priceAvg200: round2(f.price * 0.94),
    exchange: f.fmpExchange,
    open: round2(f.prevClose * 1.001),
    previousClose: f.prevClose,
    timestamp: Math.floor(Date.now() / 1000),
  };
}

/** FMP's `stable/profile`, the fields a quote reads from it and those around them. */
function fmpProfile(symbol: string, f: Fixture): unknown {
  return {
    symbol,
    price: f.price,
    marketCap: 3500823120000,
    beta: 1.24,
    lastDividend: 1.01,
    range: `${round2(f.price * 0.7)}-${round2(f.price * 1.12)}`,
    change: round2(f.price - f.prevClose),
    changePercentage: Math.round(((f.price - f.prevClose) / f.prevClose) * 1e6) / 1e4,
    volume: 44489128,
    averageVolume: 61_234_000,
    companyName: f.name,
    currency: 'USD',
    cik: '0000320193',
    isin: 'US0378331005',
    cusip: '037833100',
    exchangeFullName: f.fmpExchange === 'NASDAQ' ? 'NASDAQ Global Select' : f.fmpExchange,
    exchange: f.fmpExchange,
    industry: 'Consumer Electronics',
    website: 'https://www.example.com',
    country: 'US',
    isEtf: f.type === 'ETF',
    isActivelyTrading: true,
    isAdr: false,
    isFund: false,
  };
}
