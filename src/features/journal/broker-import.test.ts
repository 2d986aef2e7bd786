// DESIGN §17: each broker layout's file — built from the columns the brokers document, with partial
// fills, a short, a flip, a cancelled order and section totals — imports to the exact trades and
// journal; the forms of numbers and times they write, their encodings and delimiters.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { decodeTradeFile, readBrokerFile } from './brokers/index.ts';
import { amountOf, isoTime } from './brokers/values.ts';
import type { ImportReportDto, JournalDto, TradeDto } from './schemas.ts';

const fixture = (name: string): Buffer => readFileSync(new URL(`../../../test/fixtures/brokers/${name}`, import.meta.url));

/** [symbol, side, quantity, price, fee, executedAt, assetClass, multiplier, externalId], oldest first. */
type Row = [string, string, string, string, string, string, string, string, string | null];

interface Expected {
  readonly format: string;
  readonly imported: number;
  readonly skipped: number;
  readonly rejected?: readonly [number, string][];
  readonly trades: readonly Row[];
  /** realizedPnl, fees, netPnl, roundTrips. */
  readonly totals: readonly [string, string, string, number];
  readonly open: readonly [string, string, string][];
}

// The account is in New York: a time the file writes without a zone is New York's (EST, UTC−5, in January).
const LAYOUTS: Readonly<Record<string, Expected>> = {
  'ibkr-flex.csv': {
    format: 'ibkr-flex',
    imported: 8,
    skipped: 2,
    trades: [
      ['AAPL', 'buy', '100', '185.5', '1', '2024-01-05T15:30:00.000Z', 'stock', '1', '1001'],
      ['AAPL', 'sell', '60', '186.25', '0.5', '2024-01-05T16:00:00.000Z', 'stock', '1', '1002'],
      ['AAPL', 'sell', '40', '186.3', '0.5', '2024-01-05T16:00:01.000Z', 'stock', '1', '1003'],
      ['TSLA', 'sell', '10', '240', '1', '2024-01-05T17:00:00.000Z', 'stock', '1', '1004'],
      ['TSLA', 'buy', '20', '238', '1', '2024-01-05T17:30:00.000Z', 'stock', '1', '1005'],
      ['ESH4', 'buy', '1', '4750.25', '2.25', '2024-01-05T18:00:00.000Z', 'future', '50', '1006'],
      ['ESH4', 'sell', '1', '4758.5', '2.25', '2024-01-05T19:00:00.000Z', 'future', '50', '1007'],
      ['AAPL240119C00190000', 'buy', '2', '1.25', '1.3', '2024-01-05T20:00:00.000Z', 'option', '100', '1008'],
    ],
    // AAPL 45 + 32; TSLA short 20 (the flip opens 10 long); ES 8.25 × 50 = 412.5.
    totals: ['509.5', '9.8', '499.7', 3],
    open: [
      ['AAPL240119C00190000', '2', '1.25'],
      ['TSLA', '10', '238'],
    ],
  },
  'ibkr-activity.csv': {
    format: 'ibkr-activity',
    imported: 5,
    skipped: 3,
    trades: [
      ['AAPL', 'buy', '100', '185.5', '1', '2024-01-05T15:30:00.000Z', 'stock', '1', null],
      ['AAPL', 'sell', '100', '186.25', '1', '2024-01-05T16:00:00.000Z', 'stock', '1', null],
      ['NVDA', 'sell', '1000', '490', '5', '2024-01-05T17:00:00.000Z', 'stock', '1', null],
      ['MESH4', 'buy', '2', '4750', '1.24', '2024-01-05T18:00:00.000Z', 'future', '5', null],
      ['MESH4', 'sell', '2', '4760.25', '1.24', '2024-01-05T18:30:00.000Z', 'future', '5', null],
    ],
    totals: ['177.5', '9.48', '168.02', 2],
    open: [['NVDA', '-1000', '490']],
  },
  'thinkorswim.csv': {
    format: 'thinkorswim',
    imported: 7,
    skipped: 0,
    trades: [
      ['AAPL', 'buy', '100', '185.5', '0', '2024-01-05T15:30:00.000Z', 'stock', '1', null],
      ['AAPL', 'sell', '100', '186.25', '0', '2024-01-05T16:00:00.000Z', 'stock', '1', null],
      ['SPY240119C475', 'buy', '2', '3.1', '0', '2024-01-05T17:00:00.000Z', 'option', '100', null],
      ['QQQ240119C400', 'buy', '1', '2.5', '0', '2024-01-05T18:00:00.000Z', 'option', '100', null],
      ['QQQ240119C405', 'sell', '1', '1.3', '0', '2024-01-05T18:00:00.000Z', 'option', '100', null],
      ['/ESH24', 'sell', '1', '4760', '0', '2024-01-05T19:00:00.000Z', 'future', '50', null],
      ['/ESH24', 'buy', '1', '4755.5', '0', '2024-01-05T19:30:00.000Z', 'future', '50', null],
    ],
    totals: ['300', '0', '300', 2],
    open: [
      ['QQQ240119C400', '1', '2.5'],
      ['QQQ240119C405', '-1', '1.3'],
      ['SPY240119C475', '2', '3.1'],
    ],
  },
  'tradovate.csv': {
    format: 'tradovate',
    imported: 5,
    skipped: 2,
    trades: [
      ['MESH4', 'buy', '2', '4750.25', '0', '2024-01-05T15:30:01.000Z', 'future', '5', '1001'],
      ['MESH4', 'sell', '3', '4755.75', '0', '2024-01-05T15:45:12.000Z', 'future', '5', '1002'],
      ['NQH4', 'sell', '1', '16800.5', '0', '2024-01-05T16:00:00.000Z', 'future', '20', '1003'],
      ['NQH4', 'buy', '1', '16790', '0', '2024-01-05T16:30:00.000Z', 'future', '20', '1004'],
      ['MESH4', 'buy', '1', '4752.75', '0', '2024-01-05T17:00:00.000Z', 'future', '5', '1006'],
    ],
    // MES long 5.5 × 2 × 5 = 55, flipped short 3 × 1 × 5 = 15; NQ short 10.5 × 20 = 210.
    totals: ['280', '0', '280', 3],
    open: [],
  },
  'ninjatrader.csv': {
    format: 'ninjatrader',
    imported: 5,
    skipped: 0,
    trades: [
      ['ESH24', 'buy', '2', '4750.25', '4.12', '2024-01-05T15:30:00.000Z', 'future', '50', 'a1'],
      ['ESH24', 'sell', '1', '4755.5', '2.06', '2024-01-05T15:45:00.000Z', 'future', '50', 'a2'],
      ['ESH24', 'sell', '1', '4756', '2.06', '2024-01-05T15:45:01.000Z', 'future', '50', 'a3'],
      ['NQH24', 'sell', '1', '16800.25', '2.06', '2024-01-05T18:15:00.000Z', 'future', '20', 'a4'],
      ['NQH24', 'buy', '1', '16810', '2.06', '2024-01-05T18:20:00.000Z', 'future', '20', 'a5'],
    ],
    // ES 5.25 × 50 + 5.75 × 50 = 550; NQ short −9.75 × 20 = −195.
    totals: ['355', '12.36', '342.64', 2],
    open: [],
  },
  'webull.csv': {
    format: 'webull',
    imported: 5,
    skipped: 1,
    trades: [
      ['AAPL', 'buy', '100', '185.5', '0', '2024-01-05T14:35:01.000Z', 'stock', '1', null],
      ['AAPL', 'sell', '100', '186.25', '0', '2024-01-05T15:00:02.000Z', 'stock', '1', null],
      ['TSLA', 'sell', '10', '240', '0', '2024-01-05T16:00:00.000Z', 'stock', '1', null],
      ['TSLA', 'buy', '10', '238.5', '0', '2024-01-05T16:30:00.000Z', 'stock', '1', null],
      ['MSFT', 'buy', '3', '370.1', '0', '2024-01-05T17:00:05.000Z', 'stock', '1', null],
    ],
    totals: ['90', '0', '90', 2],
    open: [['MSFT', '3', '370.1']],
  },
  'metatrader5.csv': {
    format: 'metatrader5',
    imported: 4,
    skipped: 1,
    trades: [
      ['EURUSD', 'buy', '0.5', '1.09512', '3.5', '2024-01-05T15:30:00.000Z', 'forex', '100000', '1001'],
      ['EURUSD', 'sell', '0.5', '1.09612', '3.5', '2024-01-05T16:00:00.000Z', 'forex', '100000', '1002'],
      ['XAUUSD', 'sell', '0.1', '2045.5', '1.2', '2024-01-05T17:00:00.000Z', 'cfd', '100', '1003'],
      ['XAUUSD', 'buy', '0.1', '2040.5', '1.2', '2024-01-05T17:30:00.000Z', 'cfd', '100', '1004'],
    ],
    // 0.001 × 0.5 lots × 100,000 = 50; gold 5 × 0.1 × 100 oz = 50.
    totals: ['100', '9.4', '90.6', 2],
    open: [],
  },
  'topstepx.csv': {
    format: 'topstepx',
    imported: 4,
    skipped: 0,
    trades: [
      ['MESH4', 'buy', '2', '4750.25', '0', '2024-01-05T15:30:00.123Z', 'future', '5', '9001-entry'],
      ['MESH4', 'sell', '2', '4755.75', '1.48', '2024-01-05T15:35:30.456Z', 'future', '5', '9001-exit'],
      ['NQH4', 'sell', '1', '16800.5', '0', '2024-01-05T16:00:00.000Z', 'future', '20', '9002-entry'],
      ['NQH4', 'buy', '1', '16810', '0.74', '2024-01-05T16:02:00.000Z', 'future', '20', '9002-exit'],
    ],
    totals: ['-135', '2.22', '-137.22', 2],
    open: [],
  },
  'generic-eu.csv': {
    format: 'generic',
    imported: 2,
    skipped: 0,
    rejected: [[1, 'VALIDATION_ERROR']],
    trades: [
      ['SAP', 'buy', '10', '180.5', '1.25', '2024-01-05T15:30:00.000Z', 'stock', '1', null],
      ['SAP', 'sell', '10', '1182', '2.5', '2024-01-05T20:45:00.000Z', 'stock', '1', null],
    ],
    totals: ['10015', '3.75', '10011.25', 1],
    open: [],
  },
};

describe('broker files (DESIGN §17)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ clock: new ManualClock(new Date('2024-02-01T15:00:00Z')) });
  });
  after(async () => t.close());

  async function account(user: string): Promise<string> {
    const res = await t.call('POST', '/api/accounts', {
      user,
      body: { name: `a-${randomUUID()}`, currency: 'USD', timezone: 'America/New_York', startingBalance: '10000' },
    });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<{ id: string }>().id;
  }
  async function importFile(user: string, accountId: string, body: Buffer | string, query = '') {
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/accounts/${accountId}/trades/import${query}`,
      headers: { 'content-type': 'text/csv', authorization: `Bearer ${await t.token(user)}` },
      payload: body,
    });
    return { statusCode: res.statusCode, body: res.body, json: <T>() => JSON.parse(res.body) as T };
  }

  for (const [file, expected] of Object.entries(LAYOUTS)) {
    test(`DESIGN 17: ${expected.format} (${file}) is detected from its header and imports to the exact trades and journal; again, nothing added`, async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const res = await importFile(u, a, fixture(file));
      assert.equal(res.statusCode, 200, res.body);
      const report = res.json<ImportReportDto>();
      assert.deepEqual(
        [report.format, report.imported, report.duplicates, report.skipped, report.rejected.map((r) => [r.row, r.code])],
        [expected.format, expected.imported, 0, expected.skipped, expected.rejected ?? []],
        res.body,
      );
      const trades = (await t.call('GET', `/api/accounts/${a}/trades?limit=200`, { user: u })).json<{ items: TradeDto[] }>().items.reverse();
      assert.deepEqual(
        trades.map((x): Row => [x.symbol, x.side, x.quantity, x.price, x.fee, x.executedAt, x.assetClass, x.multiplier, x.externalId]),
        expected.trades,
      );
      const j = (await t.call('GET', `/api/accounts/${a}/journal?from=2024-01-01&to=2024-01-31`, { user: u })).json<JournalDto>();
      assert.deepEqual([j.totals.realizedPnl, j.totals.fees, j.totals.netPnl, j.totals.roundTrips], expected.totals);
      assert.deepEqual(
        j.openPositions.map((p) => [p.symbol, p.quantity, p.averagePrice]),
        expected.open,
      );
      const again = (await importFile(u, a, fixture(file))).json<ImportReportDto>();
      assert.deepEqual([again.imported, again.duplicates], [0, expected.imported]);
    });
  }

  test('DESIGN 17: ?format= names the layout; a file of another layout under it → 400 VALIDATION_ERROR naming what it lacks; import-formats lists every layout with its columns', async () => {
    const u = `u-${randomUUID()}`;
    const a = await account(u);
    const named = await importFile(u, a, fixture('webull.csv'), '?format=webull&dryRun=true');
    assert.equal(named.json<ImportReportDto>().format, 'webull');
    const wrong = await importFile(u, a, fixture('webull.csv'), '?format=tradovate');
    assert.equal(wrong.statusCode, 400);
    assert.match(wrong.json<{ error: { message: string } }>().error.message, /Tradovate.*lacks/);
    const formats = (await t.call('GET', '/api/journal/import-formats', { user: u })).json<{ formats: { id: string; columns: string[] }[] }>().formats;
    assert.deepEqual(
      formats.map((f) => f.id),
      ['generic', 'ibkr-activity', 'thinkorswim', 'ibkr-flex', 'tradovate', 'ninjatrader', 'webull', 'metatrader5', 'topstepx'],
    );
    assert.ok(formats.every((f) => f.columns.length >= 4));
    const unknown = await importFile(u, a, 'When,What\n1,2\n');
    assert.equal(unknown.statusCode, 400);
    assert.match(unknown.json<{ error: { message: string } }>().error.message, /no known layout/);
  });

  test('DESIGN 17: UTF-8 with a BOM, UTF-16 LE and BE with a BOM and Windows-1252 read the same trades; tab and ; delimiters', async () => {
    const text = 'symbol\tside\tquantity\tprice\texecutedAt\tnote\nAAPL\tBOT\t1\t100\t2024-01-05T10:30:00\tcafé €5\n';
    const utf16le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
    const utf16be = Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()]);
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text, 'utf8')]);
    // Windows-1252: é is 0xE9, € is 0x80.
    const cp1252 = Buffer.from(text.replace('é', '\u0000').replace('€', '\u0001'), 'latin1').map((b) => (b === 0 ? 0xe9 : b === 1 ? 0x80 : b));
    for (const bytes of [utf16le, utf16be, bom, Buffer.from(cp1252)]) {
      assert.equal(decodeTradeFile(bytes), text);
      const rows = readBrokerFile(decodeTradeFile(bytes)).rows;
      assert.deepEqual(rows, [
        { row: 1, kind: 'trade', trade: { ...(rows[0]?.kind === 'trade' ? rows[0].trade : {}), symbol: 'AAPL', side: 'buy', note: 'café €5' } },
      ]);
    }
    const semicolons = readBrokerFile('symbol;side;quantity;price;executedAt\nAAPL;sell;1,5;1.234,56;13/01/2024 09:30\n').rows[0];
    assert.deepEqual(semicolons?.kind === 'trade' ? [semicolons.trade.quantity, semicolons.trade.price, semicolons.trade.executedAt] : semicolons, [
      '1.5',
      '1234.56',
      '2024-01-13T09:30:00',
    ]);
  });

  test('DESIGN 17: the number forms brokers write', () => {
    const cases: [string, boolean, string | undefined, boolean][] = [
      ['$1,234.50', false, '1234.5', false],
      ['(120.50)', false, '120.5', true],
      ['-3', false, '3', true],
      ['+100', false, '100', false],
      ['@187.50', false, '187.5', false],
      ['-1,000', false, '1000', true],
      ['1.234,56', true, '1234.56', false],
      ['12,5', true, '12.5', false],
      ['.00', false, '0', false],
      ['0.00000001', false, '0.00000001', false],
      ['1e2', false, undefined, false],
      ['', false, undefined, false],
      ['abc', false, undefined, false],
    ];
    for (const [text, comma, digits, negative] of cases) {
      const a = amountOf(text, comma);
      assert.deepEqual(a === undefined ? undefined : [a.digits, a.negative], digits === undefined ? undefined : [digits, negative], text);
    }
  });

  test('DESIGN 17: the time forms brokers write — an offset or zone kept, none left a wall-clock time; impossible dates refused', () => {
    const cases: [string, string | undefined, ('month-first' | 'day-first')?][] = [
      ['20240105;103000', '2024-01-05T10:30:00'],
      ['20240105 103000', '2024-01-05T10:30:00'],
      ['2024-01-05, 10:30:00', '2024-01-05T10:30:00'],
      ['1/5/24 10:30:00', '2024-01-05T10:30:00'],
      ['01/05/2024 10:30:01', '2024-01-05T10:30:01'],
      ['1/5/2024 1:15:00 PM', '2024-01-05T13:15:00'],
      ['1/5/2024 12:05:00 AM', '2024-01-05T00:05:00'],
      ['01/05/2024 10:30:00 EST', '2024-01-05T10:30:00-05:00'],
      ['07/05/2024 10:30:00 EDT', '2024-07-05T10:30:00-04:00'],
      ['2024.01.05 10:30:00', '2024-01-05T10:30:00'],
      ['05.01.2024 10:30:00', '2024-01-05T10:30:00'],
      ['05/01/2024 10:30', '2024-01-05T10:30:00', 'day-first'],
      ['2024-01-05T15:30:00.123+00:00', '2024-01-05T15:30:00.123Z'],
      ['2024-01-05 10:30:00', '2024-01-05T10:30:00'],
      ['2024-01-05T10:30:00-0500', '2024-01-05T10:30:00-05:00'],
      ['2/30/2024 10:00:00', undefined],
      ['1/5/2024 13:15:00 PM', undefined],
      ['2024-01-05', undefined],
      ['01/05/2024 10:30:00 XYZ', undefined],
    ];
    for (const [text, iso, order] of cases) assert.equal(isoTime(text, order), iso, text);
  });
});
