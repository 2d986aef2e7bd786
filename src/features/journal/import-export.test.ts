// DESIGN §14: CSV import (RFC 4180, any column order and case, broker side words, duplicates, rejected
// rows by number with a code, sizes) and export (the import's columns, formula cells neutralised).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import type { ImportReportDto, JournalDto, TradeDto } from './schemas.ts';

async function createAccount(t: TestApp, user: string): Promise<string> {
  const res = await t.call('POST', '/api/accounts', {
    user,
    body: { name: `a-${randomUUID()}`, currency: 'USD', timezone: 'America/New_York', startingBalance: '5000' },
  });
  assert.equal(res.statusCode, 201, res.body);
  return res.json<{ id: string }>().id;
}

/** POST …/trades/import with a raw body (the test app's `call` sends JSON). */
async function postImport(t: TestApp, user: string, accountId: string, csv: string | Buffer, contentType = 'text/csv') {
  const token = await t.token(user);
  const res = await t.app.inject({
    method: 'POST',
    url: `/api/accounts/${accountId}/trades/import`,
    headers: { 'content-type': contentType, authorization: `Bearer ${token}` },
    payload: csv,
  });
  return { statusCode: res.statusCode, body: res.body, json: <T>() => JSON.parse(res.body) as T };
}

describe('CSV import and export (DESIGN §14)', () => {
  let t: TestApp;
  const clock = new ManualClock(new Date('2026-03-20T15:00:00Z'));
  before(async () => {
    t = await buildTestApp({ clock });
  });
  after(async () => t.close());

  const account = (user: string): Promise<string> => createAccount(t, user);
  const importCsv = (user: string, accountId: string, csv: string | Buffer, contentType?: string) => postImport(t, user, accountId, csv, contentType);
  const trades = async (user: string, accountId: string): Promise<TradeDto[]> =>
    (await t.call('GET', `/api/accounts/${accountId}/trades?limit=200`, { user })).json<{ items: TradeDto[] }>().items;

  test('DESIGN 14: columns in any order and case, side words B/S/BOT/SLD, RFC 4180 quoting; the same file again adds nothing', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const csv = [
      'ExecutedAt,SIDE,symbol,Quantity,price,Fee,externalid,NOTE,broker account',
      '2026-03-18T14:30:00Z,BOT,aapl,10,187.50,1.00,X-1,"opening, small",U123',
      '2026-03-18T15:00:00Z,SLD,aapl,4,190,0.5,X-2,"said ""wait""",U123',
      '2026-03-19T14:00:00Z,B,MSFT,1.5,400,,,"line one\nline two",U123',
      '2026-03-19T14:00:00Z,B,MSFT,1.5,400,,,"line one\nline two",U123',
      '2026-03-19T15:00:00-04:00,s,msft,3,401,0,,,U123',
      '',
    ].join('\r\n');
    const res = await importCsv(u, a, csv);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { format: 'generic', timezone: null, dryRun: false, imported: 5, duplicates: 0, skipped: 0, rejectedCount: 0, rejected: [] });
    const stored = await trades(u, a);
    assert.deepEqual(
      stored.map((x) => [x.symbol, x.side, x.quantity, x.price, x.fee, x.executedAt, x.tradingDay, x.externalId, x.note]),
      [
        ['MSFT', 'sell', '3', '401', '0', '2026-03-19T19:00:00.000Z', '2026-03-19', null, null],
        ['MSFT', 'buy', '1.5', '400', '0', '2026-03-19T14:00:00.000Z', '2026-03-19', null, 'line one\nline two'],
        ['MSFT', 'buy', '1.5', '400', '0', '2026-03-19T14:00:00.000Z', '2026-03-19', null, 'line one\nline two'],
        ['AAPL', 'sell', '4', '190', '0.5', '2026-03-18T15:00:00.000Z', '2026-03-18', 'X-2', 'said "wait"'],
        ['AAPL', 'buy', '10', '187.5', '1', '2026-03-18T14:30:00.000Z', '2026-03-18', 'X-1', 'opening, small'],
      ],
    );
    const again = await importCsv(u, a, csv);
    assert.deepEqual(again.json(), {
      format: 'generic',
      timezone: null,
      dryRun: false,
      imported: 0,
      duplicates: 5,
      skipped: 0,
      rejectedCount: 0,
      rejected: [],
    });
    assert.equal((await trades(u, a)).length, 5);
    const j = (await t.call('GET', `/api/accounts/${a}/journal?from=2026-03-18&to=2026-03-19`, { user: u })).json<JournalDto>();
    // AAPL 4 × (190 − 187.5) = 10; MSFT 3 × (401 − 400) = 3; fees 1.5.
    assert.deepEqual([j.totals.realizedPnl, j.totals.fees, j.totals.netPnl, j.totals.roundTrips], ['13', '1.5', '11.5', 1]);
  });

  test('DESIGN 14: a bad row never stops the good ones: rejected rows by 1-based data row with the code a create would get', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    await t.call('POST', `/api/accounts/${a}/trades`, {
      user: u,
      body: { symbol: 'NVDA', side: 'buy', quantity: '1', price: '100', executedAt: '2026-03-17T15:00:00Z', externalId: 'taken' },
    });
    const csv = [
      'symbol,side,quantity,price,fee,executedAt,externalId,note',
      'NVDA,buy,1,100,0,2026-03-17T15:00:00Z,taken,', // 1: the stored trade again → duplicate
      'NVDA,buy,2,100,0,2026-03-17T15:00:00Z,taken,', // 2: its externalId with another quantity
      'NVDA,hold,1,100,0,2026-03-17T15:00:00Z,,', // 3: side
      'NVDA,sell,0,100,0,2026-03-17T15:00:00Z,,', // 4: quantity
      'NVDA,sell,1,1e2,0,2026-03-17T15:00:00Z,,', // 5: price
      'NVDA,sell,1,100,0,2026-03-17,,', // 6: executedAt
      'NVDA,sell,1,100,0,2026-03-21T15:00:00Z,,', // 7: in the future
      'NVDA,sell,1,100', // 8: too few cells
      'NVDA,sell,1,101,0,2026-03-17T16:00:00Z,new-1,ok', // 9: good
      'NVDA,sell,1,102,0,2026-03-17T16:30:00Z,new-1,ok', // 10: new-1 again with other fields
      'NVDA,sell,1,101,0,2026-03-17T16:00:00Z,new-1,ok', // 11: new-1 again, same fill → duplicate
      'BAD SYMBOL,sell,1,100,0,2026-03-17T15:00:00Z,,', // 12: symbol
    ].join('\n');
    const res = await importCsv(u, a, csv);
    assert.equal(res.statusCode, 200, res.body);
    const report = res.json<ImportReportDto>();
    assert.deepEqual([report.imported, report.duplicates, report.rejectedCount], [1, 2, 9]);
    assert.deepEqual(
      report.rejected.map((r) => [r.row, r.code]),
      [
        [2, 'TRADE_EXTERNAL_ID_REUSED'],
        [3, 'VALIDATION_ERROR'],
        [4, 'VALIDATION_ERROR'],
        [5, 'VALIDATION_ERROR'],
        [6, 'VALIDATION_ERROR'],
        [7, 'VALIDATION_ERROR'],
        [8, 'VALIDATION_ERROR'],
        [10, 'TRADE_EXTERNAL_ID_REUSED'],
        [12, 'VALIDATION_ERROR'],
      ],
    );
    assert.match(report.rejected[1]?.message ?? '', /side/);
    assert.deepEqual(
      (await trades(u, a)).map((x) => x.externalId),
      ['new-1', 'taken'],
    );
  });

  test('DESIGN 14: at most 100 rejected rows are listed; rejectedCount counts them all', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const rows = Array.from({ length: 150 }, (_, i) => (i === 75 ? 'AAPL,buy,1,1,2026-03-17T15:00:00Z' : 'AAPL,buy,0,1,2026-03-17T15:00:00Z'));
    const res = await importCsv(u, a, ['symbol,side,quantity,price,executedAt', ...rows].join('\n'));
    const report = res.json<ImportReportDto>();
    assert.deepEqual(
      [report.imported, report.rejectedCount, report.rejected.length, report.rejected[0]?.row, report.rejected.at(-1)?.row],
      [1, 149, 100, 1, 101],
    );
  });

  test('DESIGN 14: not CSV, no usable header, or over 50,000 rows → 400 VALIDATION_ERROR, nothing imported', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const bodies: [string, string | Buffer][] = [
      ['an unclosed quote', 'symbol,side,quantity,price,executedAt\n"AAPL,buy,1,1,2026-03-17T15:00:00Z\n'],
      ['a header without executedAt', 'symbol,side,quantity,price\nAAPL,buy,1,1\n'],
      ['a column named twice', 'symbol,Symbol,side,quantity,price,executedAt\n'],
      ['an empty body', ''],
      ['bytes that are not UTF-8', Buffer.from([0x73, 0x79, 0x6d, 0xff, 0x0a])],
      ['50,001 data rows', `symbol,side,quantity,price,executedAt\n${'AAPL,buy,1,1,2026-03-17T15:00:00Z\n'.repeat(50_001)}`],
    ];
    for (const [what, body] of bodies) {
      const res = await importCsv(u, a, body);
      assert.deepEqual([res.statusCode, JSON.parse(res.body).error?.code], [400, 'VALIDATION_ERROR'], `${what}: ${res.body.slice(0, 200)}`);
    }
    const json = await importCsv(u, a, '{"symbol":"AAPL"}', 'application/json');
    assert.equal(json.statusCode, 400, 'a JSON body is not a CSV');
    assert.equal((await trades(u, a)).length, 0);
  });

  test('DESIGN 14: a body over 5 MiB → 413 PAYLOAD_TOO_LARGE (the service’s one code for it), nothing imported', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const row = 'AAPL,buy,1,1,2026-03-17T15:00:00Z,' + 'n'.repeat(200) + '\n';
    const body = `symbol,side,quantity,price,executedAt,note\n${row.repeat(Math.ceil((5 * 1024 * 1024) / row.length) + 1)}`;
    assert.ok(Buffer.byteLength(body) > 5 * 1024 * 1024);
    const res = await importCsv(u, a, body);
    assert.deepEqual([res.statusCode, JSON.parse(res.body).error?.code], [413, 'PAYLOAD_TOO_LARGE']);
    assert.equal((await trades(u, a)).length, 0);
  });

  test('DESIGN 14: 50,000 rows import in one request (the largest file taken)', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const start = Date.parse('2025-01-01T14:30:00Z');
    const lines = Array.from(
      { length: 50_000 },
      (_, i) => `S${i % 20},${i % 3 === 0 ? 'S' : 'B'},${(i % 7) + 1},${100 + (i % 13)}.25,0.01,${new Date(start + i * 60_000).toISOString()}`,
    );
    const res = await importCsv(u, a, `symbol,side,quantity,price,fee,executedAt\n${lines.join('\n')}`);
    assert.equal(res.statusCode, 200, res.body.slice(0, 300));
    assert.deepEqual(res.json(), {
      format: 'generic',
      timezone: null,
      dryRun: false,
      imported: 50_000,
      duplicates: 0,
      skipped: 0,
      rejectedCount: 0,
      rejected: [],
    });
    const n = await sql<{ n: number }>`select count(*)::int as n from trades where account_id = ${a}`.execute(t.deps.db);
    assert.equal(n.rows[0]?.n, 50_000);
  });

  test("DESIGN 14: export writes the import’s columns; formula cells get a leading '; the export imports back as duplicates", async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    for (const [note, externalId] of [
      ['=HYPERLINK("http://x")', 'e1'],
      ['+1', 'e2'],
      ['-2 quiet', 'e3'],
      ['@SUM(A1)', 'e4'],
      ['plain, with "quotes"', 'e5'],
    ] as const) {
      const res = await t.call('POST', `/api/accounts/${a}/trades`, {
        user: u,
        body: { symbol: 'aapl', side: 'buy', quantity: '1.50', price: '10', executedAt: '2026-03-18T15:00:00Z', note, externalId },
      });
      assert.equal(res.statusCode, 201, res.body);
    }
    const res = await t.call('GET', `/api/accounts/${a}/trades/export`, { user: u });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/csv/);
    const lines = res.body.split('\r\n');
    assert.equal(lines[0], 'symbol,side,quantity,price,fee,executedAt,externalId,note,tags,assetClass,multiplier,stopPrice');
    assert.deepEqual(lines.slice(1, 6), [
      `AAPL,buy,1.5,10,0,2026-03-18T15:00:00.000Z,e1,"'=HYPERLINK(""http://x"")",,stock,1,`,
      `AAPL,buy,1.5,10,0,2026-03-18T15:00:00.000Z,e2,'+1,,stock,1,`,
      `AAPL,buy,1.5,10,0,2026-03-18T15:00:00.000Z,e3,'-2 quiet,,stock,1,`,
      `AAPL,buy,1.5,10,0,2026-03-18T15:00:00.000Z,e4,'@SUM(A1),,stock,1,`,
      `AAPL,buy,1.5,10,0,2026-03-18T15:00:00.000Z,e5,"plain, with ""quotes""",,stock,1,`,
    ]);
    assert.equal(lines[6], '');
    const back = await importCsv(u, a, res.body);
    assert.deepEqual(back.json(), { format: 'generic', timezone: null, dryRun: false, imported: 0, duplicates: 5, skipped: 0, rejectedCount: 0, rejected: [] });
  });

  test('DESIGN 14: the same CSV imported concurrently → its rows stored once', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const csv = [
      'symbol,side,quantity,price,executedAt,externalId',
      ...Array.from(
        { length: 40 },
        (_, i) => `AAPL,${i % 2 ? 'sell' : 'buy'},1,${100 + i},2026-03-18T15:${String(i).padStart(2, '0')}:00Z,${i % 4 === 0 ? '' : `x${i}`}`,
      ),
    ].join('\n');
    const results = await Promise.all(Array.from({ length: 8 }, () => importCsv(u, a, csv)));
    assert.ok(
      results.every((r) => r.statusCode === 200),
      results.map((r) => r.body).join('\n'),
    );
    const reports = results.map((r) => r.json<ImportReportDto>());
    assert.deepEqual(
      reports.map((r) => r.imported).sort((x, y) => y - x),
      [40, 0, 0, 0, 0, 0, 0, 0],
    );
    assert.ok(reports.every((r) => r.imported + r.duplicates === 40 && r.rejectedCount === 0));
    assert.equal((await trades(u, a)).length, 40);
    const j = (await t.call('GET', `/api/accounts/${a}/journal?from=2026-03-18&to=2026-03-18`, { user: u })).json<JournalDto>();
    assert.deepEqual([j.days[0]?.fills, j.totals.roundTrips, j.totals.realizedPnl], [40, 20, '20']);
    // DESIGN §17: the round trips kept on write, once each, whatever the interleaving.
    const trips = (await t.call('GET', `/api/accounts/${a}/round-trips?limit=200`, { user: u })).json<{ items: { netPnl: string }[] }>().items;
    assert.deepEqual([trips.length, new Set(trips.map((x) => x.netPnl)).size, trips[0]?.netPnl], [20, 1, '1']);
  });
});

describe('statistics after a large import (DESIGN §17 speed)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp();
  });
  after(async () => t.close());

  test("DESIGN 17: an import that grows the stored fills past autovacuum's rule (50 + 10 %) commits statistics that hold them — the planner's estimate of the new account is its fills, not one row", async () => {
    const u = `u-${randomUUID()}`;
    const importRows = async (accountId: string, n: number, prefix: string): Promise<void> => {
      const start = Date.parse('2025-01-01T14:30:00Z');
      const rows = Array.from(
        { length: n },
        (_, i) => `S${i % 20},${i % 3 === 0 ? 'S' : 'B'},1,100.25,0,${new Date(start + i * 60_000).toISOString()},${prefix}-${i}`,
      );
      const res = await postImport(t, u, accountId, `symbol,side,quantity,price,fee,executedAt,externalId\n${rows.join('\n')}`);
      assert.equal(res.statusCode, 200, res.body.slice(0, 300));
      assert.equal(res.json<ImportReportDto>().imported, n);
    };
    const estimate = async (accountId: string): Promise<number> => {
      const { rows } = await sql<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>`explain (format json)
        select * from trades where account_id = ${accountId}::uuid`.execute(t.deps.db);
      return rows[0]?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? -1;
    };
    // Statistics as autovacuum leaves them before it looks again: taken while the account had no fill.
    await importRows(await createAccount(t, u), 200, 'other');
    await sql`alter table trades set (autovacuum_enabled = false)`.execute(t.deps.db);
    const a = await createAccount(t, u);
    await sql`analyze trades`.execute(t.deps.db);
    const stale = await estimate(a);
    assert.ok(stale <= 10, `before: the account is estimated at ${stale} rows`);
    await importRows(a, 2_000, 'a');
    const fresh = await estimate(a);
    assert.ok(fresh >= 1_000, `after the import the account is estimated at ${fresh} rows (2,000 stored)`);
  });
});
