// DESIGN §11: the market reads against loopback fakes of Polygon and FMP in their real shapes: what
// each normalises to, how each refusal maps, how the key travels, and that it never leaks.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'undici';
import { startFmpFake, startPolygonFake, type MarketBehaviour, type MarketDataFake } from '../../../test/fakes/index.ts';
import { newYorkWallClockToIso } from './http.ts';
import { createMarketData, MarketDataError, type MarketData, type MarketDataErrorCode } from './index.ts';

// A read the fake answers never meets its deadline, however busy the machine; a read of a stalled fake
// (it never answers) meets any deadline, so a short one keeps those tests quick.
const deadline = (): AbortSignal => AbortSignal.timeout(60_000);
const stalledDeadline = (): AbortSignal => AbortSignal.timeout(200);

async function refusal(p: Promise<unknown>): Promise<MarketDataError> {
  const err = await p.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof MarketDataError, String(err));
  return err;
}

describe('market reads (DESIGN §11)', () => {
  const agent = new Agent();
  let polygon: MarketDataFake;
  let fmp: MarketDataFake;
  const clients = {} as Record<'polygon' | 'fmp', { data: MarketData; fake: () => MarketDataFake }>;
  before(async () => {
    polygon = await startPolygonFake();
    fmp = await startFmpFake();
    clients.polygon = { data: createMarketData({ provider: 'polygon', baseUrl: polygon.url, probeTimeoutMs: 400, agent }), fake: () => polygon };
    clients.fmp = { data: createMarketData({ provider: 'fmp', baseUrl: fmp.url, probeTimeoutMs: 400, agent }), fake: () => fmp };
  });
  after(async () => {
    await Promise.all([polygon.close(), fmp.close()]);
    await agent.close();
  });

  test('New York wall clock to UTC follows daylight saving time', () => {
    assert.equal(newYorkWallClockToIso('2025-07-01 09:30:00'), '2025-07-01T13:30:00.000Z');
    assert.equal(newYorkWallClockToIso('2025-01-02 09:30:00'), '2025-01-02T14:30:00.000Z');
    // The Sunday clocks go forward (9 March 2025) and back (2 November 2025).
    assert.equal(newYorkWallClockToIso('2025-03-10 09:30:00'), '2025-03-10T13:30:00.000Z');
    assert.equal(newYorkWallClockToIso('2025-11-03 09:30:00'), '2025-11-03T14:30:00.000Z');
    assert.equal(newYorkWallClockToIso('not a time'), null);
  });

  for (const name of ['polygon', 'fmp'] as const) {
    const c = () => clients[name];
    const key = () => c().fake().validKey;

    test(`${name}: get_quote normalises the provider's quote`, async () => {
      const q = await c().data.quote(key(), 'AAPL', deadline());
      assert.equal(q.symbol, 'AAPL');
      assert.equal(q.price, 232.8);
      assert.equal(q.previousClose, 231.82);
      assert.equal(q.change, 0.98);
      assert.ok(q.changePercent !== null && Math.abs(q.changePercent - 0.4227) < 0.001, String(q.changePercent));
      assert.ok(q.open !== null && q.high !== null && q.low !== null && q.volume !== null);
      assert.ok(Math.abs(Date.parse(q.asOf) - Date.now()) < 60_000, q.asOf);
      assert.match(q.asOf, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.deepEqual([q.currency, q.marketState, q.exchangeTimezone], ['USD', 'open', 'America/New_York']);
    });

    test(`${name}: get_quote carries the market's session (issue 29), and a quote stays a quote when the session cannot be read`, async () => {
      const f = c().fake();
      try {
        // FMP reports regular hours only: outside them its exchanges are closed.
        for (const [session, expected] of [
          ['closed', 'closed'],
          ['pre-market', name === 'polygon' ? 'pre-market' : 'closed'],
          ['after-hours', name === 'polygon' ? 'after-hours' : 'closed'],
        ] as const) {
          f.setSession(session);
          assert.equal((await c().data.quote(key(), 'MSFT', deadline())).marketState, expected, session);
        }
        f.setSession('open');
        if (name === 'polygon') {
          // Polygon's key probe is the market status: refused, it leaves the quote without a session.
          f.setProbe('unauthorized');
          const q = await c().data.quote(key(), 'MSFT', deadline());
          assert.deepEqual([q.price, q.marketState, q.currency], [415.1, null, 'USD']);
        }
      } finally {
        f.setSession('open');
        f.setProbe('ok');
      }
    });

    test(`${name}: a symbol the provider does not list → UNKNOWN_SYMBOL`, async () => {
      assert.equal((await refusal(c().data.quote(key(), 'ZZZZZ', deadline()))).code, 'UNKNOWN_SYMBOL');
    });

    test(`${name}: intraday bars are oldest first, stamped in UTC across daylight saving time`, async () => {
      const summer = await c().data.priceHistory(key(), { symbol: 'AAPL', interval: '1hour', from: '2025-07-01', to: '2025-07-01' }, deadline());
      assert.deepEqual(
        summer.bars.map((b) => b.t),
        ['13:30', '14:30', '15:30', '16:30', '17:30', '18:30', '19:30'].map((h) => `2025-07-01T${h}:00.000Z`),
      );
      assert.equal(summer.truncated, false);
      const winter = await c().data.priceHistory(key(), { symbol: 'AAPL', interval: '15min', from: '2025-01-02', to: '2025-01-02' }, deadline());
      assert.equal(winter.bars.length, 26);
      assert.equal(winter.bars[0]?.t, '2025-01-02T14:30:00.000Z');
      assert.equal(winter.bars.at(-1)?.t, '2025-01-02T20:45:00.000Z');
      for (const b of winter.bars) assert.ok(b.low <= Math.min(b.open, b.close) && b.high >= Math.max(b.open, b.close));
    });

    test(`${name}: daily bars are named by their trading date; weekends have none`, async () => {
      const h = await c().data.priceHistory(key(), { symbol: 'MSFT', interval: '1day', from: '2025-01-03', to: '2025-01-07' }, deadline());
      assert.deepEqual(
        h.bars.map((b) => b.t),
        ['2025-01-03', '2025-01-06', '2025-01-07'],
      );
      assert.deepEqual([h.symbol, h.interval, h.truncated], ['MSFT', '1day', false]);
    });

    test(`${name}: more than 500 bars → the latest 500, truncated: true`, async () => {
      const h = await c().data.priceHistory(key(), { symbol: 'SPY', interval: '1min', from: '2025-01-02', to: '2025-01-03' }, deadline());
      assert.equal(h.bars.length, 500);
      assert.equal(h.truncated, true);
      assert.equal(h.bars.at(-1)?.t, '2025-01-03T20:59:00.000Z');
      assert.ok(
        h.bars.every((b, i) => i === 0 || (h.bars[i - 1]?.t ?? '') < b.t),
        'oldest first',
      );
    });

    test(`${name}: market status and symbol search`, async () => {
      const s = await c().data.marketStatus(key(), deadline());
      assert.equal(s.market, 'open');
      assert.equal(s.exchanges?.['nyse'], 'open');
      assert.equal(s.exchanges?.['nasdaq'], 'open');
      const byName = await c().data.searchSymbols(key(), 'apple', deadline());
      assert.deepEqual(
        byName.map((m) => [m.symbol, m.name]),
        [['AAPL', 'Apple Inc.']],
      );
      const byTicker = await c().data.searchSymbols(key(), 'BRK', deadline());
      assert.deepEqual(
        byTicker.map((m) => m.symbol),
        ['BRK.B'],
      );
      assert.deepEqual(await c().data.searchSymbols(key(), 'nothing like it', deadline()), []);
    });

    const refusals: [MarketBehaviour, MarketDataErrorCode][] = [
      ['unauthorized', 'MARKET_DATA_KEY_INVALID'],
      ['not-entitled', 'MARKET_DATA_NOT_ENTITLED'],
      ['rate-limited', 'MARKET_DATA_RATE_LIMITED'],
      ['server-error', 'MARKET_DATA_UNAVAILABLE'],
      ['stall', 'MARKET_DATA_UNAVAILABLE'],
      ...(name === 'fmp'
        ? ([
            ['forbidden-key', 'MARKET_DATA_KEY_INVALID'],
            ['error-under-200', 'MARKET_DATA_RATE_LIMITED'],
          ] as [MarketBehaviour, MarketDataErrorCode][])
        : []),
    ];
    for (const [behaviour, code] of refusals) {
      test(`${name}: provider answers ${behaviour} → ${code}, on every read, without the key in the error`, async () => {
        c().fake().setMarket(behaviour);
        try {
          const k = key();
          const signal = behaviour === 'stall' ? stalledDeadline : deadline;
          const reads = [
            c().data.quote(k, 'AAPL', signal()),
            c().data.priceHistory(k, { symbol: 'AAPL', interval: '1day', from: '2025-01-02', to: '2025-01-03' }, signal()),
            c().data.marketStatus(k, signal()),
            c().data.searchSymbols(k, 'apple', signal()),
          ];
          for (const err of await Promise.all(reads.map(refusal))) {
            assert.equal(err.code, code);
            assert.ok(!JSON.stringify({ m: err.message, s: err.stack }).includes(k), 'the key never appears in an error');
          }
        } finally {
          c().fake().setMarket('ok');
        }
      });
    }

    test(`${name}: a key the provider does not know → MARKET_DATA_KEY_INVALID`, async () => {
      assert.equal((await refusal(c().data.quote('not-a-key-of-theirs', 'AAPL', deadline()))).code, 'MARKET_DATA_KEY_INVALID');
    });

    test(`${name}: an abort that is not the deadline rejects with its own reason (the turn is ending)`, async () => {
      c().fake().setMarket('stall');
      try {
        const ended = new AbortController();
        const reason = new Error('client went away');
        const read = c().data.quote(key(), 'AAPL', AbortSignal.any([ended.signal, AbortSignal.timeout(5_000)]));
        setTimeout(() => ended.abort(reason), 50);
        await assert.rejects(read, (e) => e === reason);
      } finally {
        c().fake().setMarket('ok');
      }
    });
  }

  test('polygon: the key travels as a bearer token, never in the URL', async () => {
    const before = polygon.requests.length;
    await clients.polygon.data.quote(polygon.validKey, 'NVDA', deadline());
    const made = polygon.requests.slice(before);
    assert.deepEqual(made.map((r) => r.path).sort(), ['/v1/marketstatus/now', '/v2/snapshot/locale/us/markets/stocks/tickers/NVDA']);
    for (const req of made) {
      assert.equal(req.headers['authorization'], `Bearer ${polygon.validKey}`);
      assert.deepEqual(Object.keys(req.query), []);
    }
  });

  test('fmp: the key travels as the apikey query parameter, as FMP documents', async () => {
    const before = fmp.requests.length;
    await clients.fmp.data.quote(fmp.validKey, 'NVDA', deadline());
    const made = fmp.requests.slice(before);
    assert.deepEqual(made.map((r) => [r.path, r.query['symbol']]).sort(), [
      ['/stable/all-exchange-market-hours', undefined],
      ['/stable/profile', 'NVDA'],
      ['/stable/quote', 'NVDA'],
    ]);
    for (const req of made) {
      assert.equal(req.query['apikey'], fmp.validKey);
      assert.equal(req.headers['authorization'], undefined);
    }
  });

  test('polygon and fmp give the same normalised bars for the same data', async () => {
    const q = { symbol: 'NVDA', interval: '5min', from: '2025-03-07', to: '2025-03-10' } as const;
    const [a, b] = await Promise.all([
      clients.polygon.data.priceHistory(polygon.validKey, q, deadline()),
      clients.fmp.data.priceHistory(fmp.validKey, q, deadline()),
    ]);
    assert.equal(a.bars.length, 156);
    assert.deepEqual(a, b);
  });
});
