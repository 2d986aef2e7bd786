// DESIGN §17 through HTTP: instruments priced by their multiplier, round trips with R, reports and
// what-ifs, the import's zone, dry run and content types, our own export imported back.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { rebuildOldBooks } from './rebuild.ts';
import type { ImportReportDto, JournalDto, ReportDto, RoundTripDto, TradeDto } from './schemas.ts';

type Json = Record<string, unknown>;

describe('real trades in (DESIGN §17)', () => {
  let t: TestApp;
  const clock = new ManualClock(new Date('2026-03-20T15:00:00Z'));
  before(async () => {
    t = await buildTestApp({ clock });
  });
  after(async () => t.close());

  async function account(user: string, timezone = 'America/New_York', startingBalance = '10000'): Promise<string> {
    const res = await t.call('POST', '/api/accounts', { user, body: { name: `a-${randomUUID()}`, currency: 'USD', timezone, startingBalance } });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<{ id: string }>().id;
  }
  async function create(user: string, accountId: string, body: Json, status = 201): Promise<TradeDto> {
    const res = await t.call('POST', `/api/accounts/${accountId}/trades`, { user, body });
    assert.equal(res.statusCode, status, res.body);
    return res.json<TradeDto>();
  }
  async function importFile(user: string, accountId: string, body: string | Buffer, query = '', contentType = 'text/csv') {
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/accounts/${accountId}/trades/import${query}`,
      headers: { 'content-type': contentType, authorization: `Bearer ${await t.token(user)}` },
      payload: body,
    });
    return { statusCode: res.statusCode, body: res.body, json: <T>() => JSON.parse(res.body) as T };
  }
  const get = async <T>(user: string, url: string, status = 200): Promise<T> => {
    const res = await t.call('GET', url, { user });
    assert.equal(res.statusCode, status, res.body);
    return res.json<T>();
  };
  const count = async (accountId: string): Promise<number> => {
    const r = await sql<{ n: number }>`select count(*)::int as n from trades where account_id = ${accountId}`.execute(t.deps.db);
    return r.rows[0]?.n ?? -1;
  };
  const fill = (symbol: string, side: string, quantity: string, price: string, executedAt: string, extra: Json = {}): Json => ({
    symbol,
    side,
    quantity,
    price,
    executedAt,
    ...extra,
  });

  describe('happy', () => {
    test('DESIGN 17: one ES contract up 8.25 points realizes 412.5 (×50 from the table); ESZ5, /NQ, MYM and an option get their multipliers', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const es = await create(u, a, fill('ESZ5', 'buy', '1', '4800', '2026-03-16T14:30:00Z', { assetClass: 'future', fee: '2.25' }));
      assert.deepEqual([es.assetClass, es.multiplier, es.stopPrice], ['future', '50', null]);
      await create(u, a, fill('ESZ5', 'sell', '1', '4808.25', '2026-03-16T15:00:00Z', { assetClass: 'future', fee: '2.25' }));
      const nq = await create(u, a, fill('/NQH6', 'sell', '2', '18000', '2026-03-17T14:30:00Z'));
      assert.deepEqual([nq.symbol, nq.assetClass, nq.multiplier], ['/NQH6', 'future', '20']);
      await create(u, a, fill('/NQH6', 'buy', '2', '18010.5', '2026-03-17T15:00:00Z'));
      const mym = await create(u, a, fill('MYMM26', 'buy', '3', '42000', '2026-03-18T14:30:00Z', { assetClass: 'future' }));
      assert.equal(mym.multiplier, '0.5');
      await create(u, a, fill('MYMM26', 'sell', '3', '42011', '2026-03-18T15:00:00Z', { assetClass: 'future' }));
      const opt = await create(u, a, fill('AAPL260417C190', 'buy', '2', '3.1', '2026-03-19T14:30:00Z', { assetClass: 'option' }));
      assert.equal(opt.multiplier, '100');
      await create(u, a, fill('AAPL260417C190', 'sell', '2', '2.95', '2026-03-19T15:00:00Z', { assetClass: 'option' }));
      const j = await get<JournalDto>(u, `/api/accounts/${a}/journal?from=2026-03-16&to=2026-03-19`);
      // ES (4808.25 − 4800) × 1 × 50 = 412.5; NQ short (18000 − 18010.5) × 2 × 20 = −420; MYM 11 × 3 × 0.5 = 16.5; option −0.15 × 2 × 100 = −30.
      assert.deepEqual(
        j.days.map((d) => [d.tradingDay, d.realizedPnl, d.fees, d.netPnl]),
        [
          ['2026-03-16', '412.5', '4.5', '408'],
          ['2026-03-17', '-420', '0', '-420'],
          ['2026-03-18', '16.5', '0', '16.5'],
          ['2026-03-19', '-30', '0', '-30'],
        ],
      );
      assert.equal(j.balance, '9974.5');
      const trips = (await get<{ items: RoundTripDto[] }>(u, `/api/accounts/${a}/round-trips?symbol=esz5`)).items;
      assert.deepEqual(
        trips.map((r) => [r.symbol, r.side, r.multiplier, r.realizedPnl, r.fees, r.netPnl, r.entryAverage, r.exitAverage]),
        [['ESZ5', 'long', '50', '412.5', '4.5', '408', '4800', '4808.25']],
      );
    });

    test('DESIGN 17: a round trip lists its averages, size, hold, fees, tags and R (|entry − stop| × q × multiplier of its opening fill); no stop → null', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, fill('AAPL', 'buy', '100', '50', '2026-03-16T14:30:00Z', { fee: '1', stopPrice: '48', tags: ['setup-a'] }));
      await create(u, a, fill('AAPL', 'buy', '50', '52', '2026-03-16T14:45:00Z', { fee: '1', stopPrice: '49' }));
      const close = await create(u, a, fill('AAPL', 'sell', '150', '55', '2026-03-16T15:30:30Z', { fee: '1.5', tags: ['news'] }));
      await create(u, a, fill('TSLA', 'sell', '10', '200', '2026-03-17T14:30:00Z'));
      await create(u, a, fill('TSLA', 'buy', '10', '201', '2026-03-17T14:31:00Z', { fee: '0.5' }));
      const page = await get<{ items: RoundTripDto[]; nextCursor: string | null }>(u, `/api/accounts/${a}/round-trips?limit=1`);
      assert.equal(page.items.length, 1);
      assert.equal(page.items[0]?.symbol, 'TSLA');
      assert.deepEqual(page.items[0], {
        id: page.items[0]?.id,
        symbol: 'TSLA',
        side: 'short',
        assetClass: 'stock',
        multiplier: '1',
        openedAt: '2026-03-17T14:30:00.000Z',
        closedAt: '2026-03-17T14:31:00.000Z',
        tradingDay: '2026-03-17',
        holdSeconds: 60,
        maxQuantity: '10',
        entryAverage: '200',
        exitAverage: '201',
        realizedPnl: '-10',
        fees: '0.5',
        netPnl: '-10.5',
        initialRisk: null,
        rMultiple: null,
        fills: 2,
        tags: [],
      });
      const next = await get<{ items: RoundTripDto[]; nextCursor: string | null }>(
        u,
        `/api/accounts/${a}/round-trips?limit=1&cursor=${encodeURIComponent(page.nextCursor ?? '')}`,
      );
      // (55 − 50) × 100 + (55 − 52) × 50 = 650, fees 3.5; risk (50 − 48) × 100 × 1 = 200 → 646.5 / 200 = 3.2325 R.
      assert.deepEqual(next.items[0], {
        id: close.id,
        symbol: 'AAPL',
        side: 'long',
        assetClass: 'stock',
        multiplier: '1',
        openedAt: '2026-03-16T14:30:00.000Z',
        closedAt: '2026-03-16T15:30:30.000Z',
        tradingDay: '2026-03-16',
        holdSeconds: 3630,
        maxQuantity: '150',
        entryAverage: '50.66666667',
        exitAverage: '55',
        realizedPnl: '650',
        fees: '3.5',
        netPnl: '646.5',
        initialRisk: '200',
        rMultiple: '3.2325',
        fills: 3,
        tags: ['news', 'setup-a'],
      });
      assert.equal(next.nextCursor, null);
      const filtered = async (q: string): Promise<string[]> =>
        (await get<{ items: RoundTripDto[] }>(u, `/api/accounts/${a}/round-trips?${q}`)).items.map((r) => r.symbol);
      assert.deepEqual(await filtered('side=short'), ['TSLA']);
      assert.deepEqual(await filtered('tag=news'), ['AAPL']);
      assert.deepEqual(await filtered('from=2026-03-17'), ['TSLA']);
      assert.deepEqual(await filtered('to=2026-03-16'), ['AAPL']);
      const j = await get<JournalDto>(u, `/api/accounts/${a}/journal?from=2026-03-16&to=2026-03-17`);
      // One trip with a stop: averageR 3.2325, expectancyR 646.5 / 200.
      assert.deepEqual([j.totals.averageR, j.totals.expectancyR], ['3.2325', '3.2325']);
    });

    test('DESIGN 17: a report by weekday, tag and side, and the what-if without Fridays, over exact round trips', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u, 'Etc/UTC');
      // Thu 2026-03-12: +100 (stop: risk 50 → 2R); Fri 2026-03-13: −40 (tag revenge); Mon 2026-03-16: +10 short.
      await create(u, a, fill('AAA', 'buy', '10', '10', '2026-03-12T14:00:00Z', { stopPrice: '5', tags: ['plan'] }));
      await create(u, a, fill('AAA', 'sell', '10', '20', '2026-03-12T15:00:00Z'));
      await create(u, a, fill('BBB', 'buy', '4', '50', '2026-03-13T15:00:00Z', { tags: ['revenge'] }));
      await create(u, a, fill('BBB', 'sell', '4', '40', '2026-03-13T15:00:20Z'));
      await create(u, a, fill('CCC', 'sell', '1', '30', '2026-03-16T09:00:00Z'));
      await create(u, a, fill('CCC', 'buy', '1', '20', '2026-03-16T09:10:00Z'));
      const range = 'from=2026-03-09&to=2026-03-20';
      const byWeekday = await get<ReportDto>(u, `/api/accounts/${a}/journal/report?${range}&by=weekday`);
      assert.deepEqual(
        byWeekday.groups.map((g) => [g.key, g.totals.roundTrips, g.totals.netPnl, g.totals.averageR]),
        [
          ['mon', 1, '10', null],
          ['thu', 1, '100', '2'],
          ['fri', 1, '-40', null],
        ],
      );
      assert.deepEqual(
        [byWeekday.totals.netPnl, byWeekday.totals.roundTrips, byWeekday.totals.winRate, byWeekday.totals.maxDrawdown],
        ['70', 3, '0.6667', '40'],
      );
      const byTag = await get<ReportDto>(u, `/api/accounts/${a}/journal/report?${range}&by=tag`);
      assert.deepEqual(
        byTag.groups.map((g) => [g.key, g.totals.netPnl]),
        [
          ['plan', '100'],
          ['revenge', '-40'],
          [null, '10'],
        ],
      );
      const byHold = await get<ReportDto>(u, `/api/accounts/${a}/journal/report?${range}&by=holdTime`);
      assert.deepEqual(
        byHold.groups.map((g) => [g.key, g.totals.roundTrips]),
        [
          ['<1m', 1],
          ['5m-30m', 1],
          ['30m-2h', 1],
        ],
      );
      const byHour = await get<ReportDto>(u, `/api/accounts/${a}/journal/report?${range}&by=hour&exclude=side:short`);
      assert.deepEqual(
        byHour.groups.map((g) => [g.key, g.totals.netPnl]),
        [
          ['14', '100'],
          ['15', '-40'],
        ],
      );
      const whatIf = await get<JournalDto>(u, `/api/accounts/${a}/journal?${range}&exclude=weekday:fri`);
      assert.deepEqual([whatIf.totals.netPnl, whatIf.totals.roundTrips, whatIf.totals.losses, whatIf.totals.maxDrawdown], ['110', 2, 0, '0']);
      assert.deepEqual(whatIf.exclude, ['weekday:fri']);
      assert.deepEqual(whatIf.excluded, { roundTrips: 1, netPnl: '-40' });
      assert.deepEqual(
        whatIf.days.map((d) => [d.tradingDay, d.netPnl, d.fills]),
        [
          ['2026-03-12', '100', 2],
          ['2026-03-16', '10', 2],
        ],
      );
      // Several at once, comma-separated or repeated: the same figures.
      const both = await get<JournalDto>(u, `/api/accounts/${a}/journal?${range}&exclude=tag:revenge,symbol:ccc`);
      const repeated = await get<JournalDto>(u, `/api/accounts/${a}/journal?${range}&exclude=tag:revenge&exclude=symbol:CCC`);
      assert.deepEqual([both.totals.netPnl, both.totals.roundTrips], ['100', 1]);
      assert.deepEqual(repeated.totals, both.totals);
    });

    test('DESIGN 17: a timestamp without an offset is read in the account’s zone (or ?timezone=); the report names it; a dry run writes nothing', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u, 'America/New_York');
      const csv = 'symbol,side,quantity,price,executedAt\nAAPL,buy,1,100,2026-03-16T09:30:00\nAAPL,sell,1,101,2026-03-16 16:00:00\n   ,  , ,\n';
      const dry = await importFile(u, a, csv, '?dryRun=true');
      assert.equal(dry.statusCode, 200, dry.body);
      const report = dry.json<ImportReportDto>();
      assert.deepEqual(
        [report.format, report.timezone, report.dryRun, report.imported, report.skipped, report.rejectedCount],
        ['generic', 'America/New_York', true, 2, 1, 0],
      );
      // 09:30 in New York on 16 March (EDT, UTC−4) is 13:30 UTC.
      assert.deepEqual(
        report.preview?.map((p) => [p.executedAt, p.tradingDay]),
        [
          ['2026-03-16T13:30:00.000Z', '2026-03-16'],
          ['2026-03-16T20:00:00.000Z', '2026-03-16'],
        ],
      );
      assert.equal(await count(a), 0);
      const london = await importFile(u, a, csv, '?timezone=europe/london');
      assert.equal(london.statusCode, 200, london.body);
      assert.deepEqual([london.json<ImportReportDto>().timezone, london.json<ImportReportDto>().imported], ['Europe/London', 2]);
      const stored = (await get<{ items: TradeDto[] }>(u, `/api/accounts/${a}/trades`)).items.map((x) => x.executedAt);
      assert.deepEqual(stored, ['2026-03-16T16:00:00.000Z', '2026-03-16T09:30:00.000Z']);
    });

    test('DESIGN 17: text/plain and application/vnd.ms-excel bodies are read; a tags column (; or a JSON array); lines of blanks are skipped', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const csv =
        'symbol,side,quantity,price,executedAt,tags\r\nMSFT,buy,1,400,2026-03-16T14:00:00Z,swing;plan\r\n , , , , , \r\nMSFT,sell,1,401,2026-03-16T15:00:00Z,"[""a;b""]"\r\n';
      for (const type of ['application/vnd.ms-excel', 'text/plain; charset=utf-8']) {
        const res = await importFile(u, a, csv, '', type);
        assert.equal(res.statusCode, 200, res.body);
        assert.deepEqual([res.json<ImportReportDto>().skipped, res.json<ImportReportDto>().rejectedCount], [1, 0]);
      }
      const items = (await get<{ items: TradeDto[] }>(u, `/api/accounts/${a}/trades`)).items;
      assert.deepEqual(
        items.map((x) => x.tags),
        [['a;b'], ['swing', 'plan']],
      );
    });

    test('DESIGN 17: our own export imported back adds nothing (cells protected with a leading quote read without it); into a new account it gives the identical journal and a byte-identical export', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, fill('-A1', 'buy', '10', '5', '2026-03-16T14:00:00Z', { note: '=1+1', externalId: '-e1', tags: ['+x', '@y', ' pad ', '[x'] }));
      await create(u, a, fill('-A1', 'sell', '10', '7.5', '2026-03-16T15:00:00Z', { note: '-minus', fee: '0.5' }));
      await create(u, a, fill('ESM6', 'buy', '1', '5000', '2026-03-17T14:00:00Z', { assetClass: 'future', stopPrice: '4990', tags: ['a;b'] }));
      await create(u, a, fill('ESM6', 'sell', '1', '5010.25', '2026-03-17T15:00:00Z', { assetClass: 'future', note: '@close' }));
      await create(u, a, fill('AAPL', 'buy', '1', '100', '2026-03-18T14:00:00Z'));
      await create(u, a, fill('AAPL', 'buy', '1', '100', '2026-03-18T14:00:00Z'));
      const exported = await t.call('GET', `/api/accounts/${a}/trades/export`, { user: u });
      assert.equal(exported.statusCode, 200);
      const same = await importFile(u, a, exported.body);
      assert.equal(same.statusCode, 200, same.body);
      assert.deepEqual([same.json<ImportReportDto>().imported, same.json<ImportReportDto>().duplicates, same.json<ImportReportDto>().rejectedCount], [0, 6, 0]);
      assert.equal(await count(a), 6);
      const b = await account(u);
      const fresh = await importFile(u, b, exported.body);
      assert.deepEqual([fresh.json<ImportReportDto>().imported, fresh.json<ImportReportDto>().rejected], [6, []]);
      const journalOf = async (id: string): Promise<Json> => {
        const j = await get<JournalDto>(u, `/api/accounts/${id}/journal?from=2026-03-01&to=2026-03-20`);
        return { ...j, accountId: '' };
      };
      assert.deepEqual(await journalOf(b), await journalOf(a));
      assert.equal((await journalOf(a))['balance'], '10537');
      const again = await t.call('GET', `/api/accounts/${b}/trades/export`, { user: u });
      assert.equal(again.body, exported.body);
      const tripsOf = async (id: string) => (await get<{ items: RoundTripDto[] }>(u, `/api/accounts/${id}/round-trips`)).items.map((r) => ({ ...r, id: '' }));
      assert.deepEqual(await tripsOf(b), await tripsOf(a));
    });

    test('DESIGN 17: the export takes the list’s filters (from, to, symbol); the trade count says what an account’s delete takes', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, fill('AAPL', 'buy', '1', '100', '2026-03-16T14:00:00Z'));
      await create(u, a, fill('MSFT', 'buy', '1', '100', '2026-03-17T14:00:00Z'));
      await create(u, a, fill('AAPL', 'sell', '1', '101', '2026-03-18T14:00:00Z'));
      const lines = async (q: string): Promise<string[]> =>
        (await t.call('GET', `/api/accounts/${a}/trades/export?${q}`, { user: u })).body
          .trim()
          .split('\r\n')
          .slice(1)
          .map((l) => l.split(',').slice(0, 2).join(' '));
      assert.deepEqual(await lines('symbol=aapl'), ['AAPL buy', 'AAPL sell']);
      assert.deepEqual(await lines('from=2026-03-17&to=2026-03-17'), ['MSFT buy']);
      assert.deepEqual(await get(u, `/api/accounts/${a}/trades/count`), { count: 3 });
    });

    test('DESIGN 17: a changed tag reaches its round trip; a deleted fill rewrites its symbol’s round trips', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const open = await create(u, a, fill('AAPL', 'buy', '2', '100', '2026-03-16T14:00:00Z'));
      await create(u, a, fill('AAPL', 'sell', '1', '101', '2026-03-16T15:00:00Z'));
      const last = await create(u, a, fill('AAPL', 'sell', '1', '102', '2026-03-16T16:00:00Z'));
      const trips = async () => (await get<{ items: RoundTripDto[] }>(u, `/api/accounts/${a}/round-trips`)).items;
      assert.equal((await t.call('PATCH', `/api/accounts/${a}/trades/${open.id}`, { user: u, body: { tags: ['fomo'] } })).statusCode, 200);
      assert.deepEqual(
        (await trips()).map((r) => [r.tags, r.netPnl]),
        [[['fomo'], '3']],
      );
      assert.equal((await t.call('DELETE', `/api/accounts/${a}/trades/${last.id}`, { user: u })).statusCode, 204);
      assert.deepEqual(await trips(), []);
    });

    test('DESIGN 17: books kept before round trips were (version 1) are replayed once at start: the same round trips, nothing else changed', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, fill('AAPL', 'buy', '2', '100', '2026-03-16T14:00:00Z', { stopPrice: '99', tags: ['x'] }));
      await create(u, a, fill('AAPL', 'sell', '3', '101', '2026-03-16T15:00:00Z'));
      await create(u, a, fill('AAPL', 'buy', '1', '100.5', '2026-03-16T16:00:00Z'));
      await create(u, a, fill('MSFT', 'buy', '1', '10', '2026-03-16T16:00:00Z'));
      const before = await get<{ items: RoundTripDto[] }>(u, `/api/accounts/${a}/round-trips`);
      const journalBefore = await get<JournalDto>(u, `/api/accounts/${a}/journal?from=2026-03-16&to=2026-03-16`);
      await sql`update trade_books set version = 1 where account_id = ${a}`.execute(t.deps.db);
      await sql`delete from trade_round_trips where account_id = ${a}`.execute(t.deps.db);
      assert.ok((await rebuildOldBooks(t.deps.db)) >= 2);
      assert.deepEqual(await get(u, `/api/accounts/${a}/round-trips`), before);
      assert.deepEqual(await get(u, `/api/accounts/${a}/journal?from=2026-03-16&to=2026-03-16`), journalBefore);
      assert.equal(await rebuildOldBooks(t.deps.db), 0);
    });
  });

  describe('error', () => {
    test('DESIGN 17: a future whose root is not in the table, with no multiplier → 400 VALIDATION_ERROR at /multiplier; a bad assetClass or multiplier → 400; nothing stored', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      for (const [body, path] of [
        [fill('ZZZZ', 'buy', '1', '1', '2026-03-16T14:00:00Z', { assetClass: 'future' }), '/multiplier'],
        [fill('AAPL', 'buy', '1', '1', '2026-03-16T14:00:00Z', { assetClass: 'bond' }), '/assetClass'],
        [fill('AAPL', 'buy', '1', '1', '2026-03-16T14:00:00Z', { multiplier: '0' }), '/multiplier'],
        [fill('AAPL', 'buy', '1', '1', '2026-03-16T14:00:00Z', { stopPrice: '-1' }), '/stopPrice'],
      ] as const) {
        const res = await t.call('POST', `/api/accounts/${a}/trades`, { user: u, body });
        assert.equal(res.statusCode, 400, res.body);
        const error = res.json<{ error: { code: string; details: { path: string }[] } }>().error;
        assert.equal(error.code, 'VALIDATION_ERROR');
        assert.ok(
          error.details.some((d) => d.path.startsWith(path)),
          `${path}: ${res.body}`,
        );
      }
      const row = await importFile(u, a, 'symbol,side,quantity,price,executedAt,assetClass\nZZZZ,buy,1,1,2026-03-16T14:00:00Z,future\n');
      assert.deepEqual(
        row.json<ImportReportDto>().rejected.map((r) => [r.row, r.code]),
        [[1, 'VALIDATION_ERROR']],
      );
      assert.equal(await count(a), 0);
    });

    test('DESIGN 17: a bad exclude, by, timezone or format → 400 VALIDATION_ERROR, nothing written', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      for (const url of [
        `/api/accounts/${a}/journal?exclude=weekday:friday-ish`,
        `/api/accounts/${a}/journal?exclude=color:red`,
        `/api/accounts/${a}/journal/report?by=moon`,
        `/api/accounts/${a}/journal/report`,
        `/api/accounts/${a}/journal/report?by=hour&exclude=hour:24`,
        `/api/accounts/${a}/round-trips?side=up`,
        `/api/accounts/${a}/round-trips?cursor=nope`,
      ]) {
        const res = await t.call('GET', url, { user: u });
        assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'VALIDATION_ERROR');
      }
      for (const q of ['?timezone=Mars/Olympus', '?format=excel97']) {
        const res = await importFile(u, a, 'symbol,side,quantity,price,executedAt\nAAPL,buy,1,1,2026-03-16T14:00:00\n', q);
        assert.equal(res.statusCode, 400, res.body);
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'VALIDATION_ERROR');
      }
      assert.equal(await count(a), 0);
    });
  });

  describe('security', () => {
    test('DESIGN 17: another user’s account is missing: round trips, report, count, export, import → 404 ACCOUNT_NOT_FOUND', async () => {
      const owner = `u-${randomUUID()}`;
      const a = await account(owner);
      const other = `u-${randomUUID()}`;
      for (const url of [
        `/api/accounts/${a}/round-trips`,
        `/api/accounts/${a}/journal/report?by=symbol`,
        `/api/accounts/${a}/trades/count`,
        `/api/accounts/${a}/trades/export`,
      ]) {
        const res = await t.call('GET', url, { user: other });
        assert.equal(res.statusCode, 404, url);
        assert.equal(res.json<{ error: { code: string } }>().error.code, 'ACCOUNT_NOT_FOUND');
      }
      const res = await importFile(other, a, 'symbol,side,quantity,price,executedAt\nAAPL,buy,1,1,2026-03-16T14:00:00Z\n');
      assert.equal(res.statusCode, 404);
      assert.equal(await count(a), 0);
    });
  });
});
