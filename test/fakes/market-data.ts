// Fakes of the market-data providers whose keys the service verifies: Polygon (market status) and
// Financial Modeling Prep (stable quote).
import type { ServerResponse } from 'node:http';
import type { FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
import { bearer, keyRing, probeStatus, randomId, sendJson, startFake } from './http-fake.ts';

export interface MarketDataFake extends FakeServer, KeyRing {
  /** Bare origin, e.g. `http://127.0.0.1:40123` (for FMP, `url` is this plus `/stable`). */
  origin: string;
  setProbe(b: ProbeBehaviour): void;
}

/** `url` is the origin; the probe is `GET {url}/v1/marketstatus/now` with the key as `?apiKey=` or a bearer token. */
export async function startPolygonFake(): Promise<MarketDataFake> {
  const keys = keyRing('pk-valid-polygon');
  let probe: ProbeBehaviour = 'ok';
  const fail = (res: ServerResponse, status: number, text?: string): void => {
    const request_id = randomId('', 16);
    // Polygon puts the reason in `error` for auth/limit failures and in `message` for entitlement.
    const body =
      status === 403
        ? { status: 'NOT_AUTHORIZED', request_id, message: "You are not entitled to this data. Please upgrade your plan at https://polygon.io/pricing" }
        : status === 429
          ? { status: 'ERROR', request_id, error: "You've exceeded the maximum requests per minute, please wait or upgrade your subscription to continue. https://polygon.io/pricing" }
          : { status: 'ERROR', request_id, error: text ?? (status >= 500 ? 'Internal server error' : 'Unknown API Key') };
    sendJson(res, status, body, status === 429 ? { 'retry-after': '1' } : {});
  };
  const fake = await startFake((req, res) => {
    if (req.method !== 'GET' || req.path !== '/v1/marketstatus/now') {
      return sendJson(res, 404, { status: 'NOT_FOUND', request_id: randomId('', 16), message: 'Route not found' });
    }
    if (probe === 'stall') return;
    const forced = probeStatus(probe, 500);
    if (forced !== undefined) return fail(res, forced);
    const key = req.query['apiKey'] ?? bearer(req);
    if (key === undefined) return fail(res, 401, 'API Key was not provided');
    if (!keys.isValid(key)) return fail(res, 401);
    sendJson(res, 200, marketStatus());
  });
  return { ...fake, ...keys, origin: fake.url, setProbe: (b) => void (probe = b) };
}

function marketStatus(): unknown {
  return {
    afterHours: false,
    currencies: { crypto: 'open', fx: 'open' },
    earlyHours: false,
    exchanges: { nasdaq: 'open', nyse: 'open', otc: 'open' },
    indicesGroups: { s_and_p: 'open', societe_generale: 'open', msci: 'open', ftse_russell: 'open', mstar: 'open', mstarc: 'open', cccy: 'open', cgi: 'open', nasdaq: 'open', dow_jones: 'open' },
    market: 'open',
    serverTime: new Date().toISOString().replace(/\.\d{3}Z$/, '-00:00'),
  };
}

/** `url` is the origin plus `/stable`; the probe is `GET {url}/quote?symbol=AAPL&apikey=KEY`. */
export async function startFmpFake(): Promise<MarketDataFake> {
  const keys = keyRing('fmp-valid');
  let probe: ProbeBehaviour = 'ok';
  const fail = (res: ServerResponse, status: number): void => {
    const message =
      status === 401 || status === 400
        ? 'Invalid API KEY. Feel free to create a Free API Key or visit https://site.financialmodelingprep.com/faqs?search=why-is-my-api-key-invalid for more information.'
        : status === 403
          ? 'Restricted Endpoint: This endpoint is not available under your current subscription agreement, please visit our subscription page to upgrade your plan or contact us at https://site.financialmodelingprep.com/developer/docs/pricing'
          : status === 429
            ? 'Limit Reach . Please upgrade your plan or visit our documentation for more details at https://site.financialmodelingprep.com/developer/docs/pricing '
            : status === 404 ? 'Not found' : 'Internal Server Error';
    sendJson(res, status, { 'Error Message': message });
  };
  const fake = await startFake((req: RecordedRequest, res) => {
    if (req.method !== 'GET' || req.path !== '/stable/quote') return fail(res, 404);
    if (probe === 'stall') return;
    const forced = probeStatus(probe, 500);
    if (forced !== undefined) return fail(res, forced);
    if (!keys.isValid(req.query['apikey'])) return fail(res, 401);
    sendJson(res, 200, [quote(req.query['symbol'] ?? 'AAPL')]);
  });
  return { ...fake, ...keys, url: `${fake.url}/stable`, origin: fake.url, setProbe: (b) => void (probe = b) };
}

function quote(symbol: string): unknown {
  return {
    symbol,
    name: symbol === 'AAPL' ? 'Apple Inc.' : `${symbol} Inc.`,
    price: 232.8,
    changePercentage: 0.4217,
    change: 0.98,
    volume: 44489128,
    dayLow: 230.63,
    dayHigh: 233.25,
    yearHigh: 260.1,
    yearLow: 164.08,
    marketCap: 3500823120000,
    priceAvg50: 240.2278,
    priceAvg200: 219.98755,
    exchange: 'NASDAQ',
    open: 231.39,
    previousClose: 231.82,
    timestamp: Math.floor(Date.now() / 1000),
  };
}
