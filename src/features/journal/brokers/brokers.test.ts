// DESIGN §17: the broker-file reading layer, without a database — each layout's fixture read to the
// exact rows, detection and ?format=, the number, time and side forms, encodings, delimiters, refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { AppError } from '../../../http/errors.ts';
import { MAX_CSV_ROWS } from '../csv.ts';
import { sideWord } from './common.ts';
import { decodeTradeFile, IMPORT_FORMATS, readBrokerFile, type BrokerRow, type BrokerTrade } from './index.ts';
import { amountOf, isoTime } from './values.ts';

const fixture = (name: string): string => decodeTradeFile(readFileSync(new URL(`../../../../test/fixtures/brokers/${name}`, import.meta.url)));

/** Rows as JSON carries them: a field left undefined is a field not given. */
const plain = (rows: readonly BrokerRow[]): unknown => JSON.parse(JSON.stringify(rows));
const trade = (row: number, t: BrokerTrade): BrokerRow => ({ row, kind: 'trade', trade: t });
const skipped = (row: number): BrokerRow => ({ row, kind: 'skipped' });
const invalid = (row: number, message: string): BrokerRow => ({ row, kind: 'invalid', message });

/** What assert.throws checks of a refused file: an AppError VALIDATION_ERROR at `path`. */
function refusal(path = '/'): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.code, 'VALIDATION_ERROR');
    assert.equal(err.details?.[0]?.path, path);
    return true;
  };
}

const FIXTURES: Readonly<Record<string, { format: string; rows: readonly BrokerRow[] }>> = {
  'ibkr-flex.csv': {
    format: 'ibkr-flex',
    rows: [
      trade(1, {
        symbol: 'AAPL',
        side: 'buy',
        quantity: '100',
        price: '185.5',
        fee: '1',
        executedAt: '2024-01-05T10:30:00',
        externalId: '1001',
        assetClass: 'stock',
        multiplier: '1',
      }),
      trade(2, {
        symbol: 'AAPL',
        side: 'sell',
        quantity: '60',
        price: '186.25',
        fee: '0.5',
        executedAt: '2024-01-05T11:00:00',
        externalId: '1002',
        assetClass: 'stock',
        multiplier: '1',
      }),
      trade(3, {
        symbol: 'AAPL',
        side: 'sell',
        quantity: '40',
        price: '186.3',
        fee: '0.5',
        executedAt: '2024-01-05T11:00:01',
        externalId: '1003',
        assetClass: 'stock',
        multiplier: '1',
      }),
      skipped(4), // LevelOfDetail ORDER: the order its two executions above fill
      trade(5, {
        symbol: 'TSLA',
        side: 'sell',
        quantity: '10',
        price: '240',
        fee: '1',
        executedAt: '2024-01-05T12:00:00',
        externalId: '1004',
        assetClass: 'stock',
        multiplier: '1',
      }),
      trade(6, {
        symbol: 'TSLA',
        side: 'buy',
        quantity: '20',
        price: '238',
        fee: '1',
        executedAt: '2024-01-05T12:30:00',
        externalId: '1005',
        assetClass: 'stock',
        multiplier: '1',
      }),
      trade(7, {
        symbol: 'ESH4',
        side: 'buy',
        quantity: '1',
        price: '4750.25',
        fee: '2.25',
        executedAt: '2024-01-05T13:00:00',
        externalId: '1006',
        assetClass: 'future',
        multiplier: '50',
      }),
      trade(8, {
        symbol: 'ESH4',
        side: 'sell',
        quantity: '1',
        price: '4758.5',
        fee: '2.25',
        executedAt: '2024-01-05T14:00:00',
        externalId: '1007',
        assetClass: 'future',
        multiplier: '50',
      }),
      trade(9, {
        symbol: 'AAPL240119C00190000',
        side: 'buy',
        quantity: '2',
        price: '1.25',
        fee: '1.3',
        executedAt: '2024-01-05T15:00:00',
        externalId: '1008',
        assetClass: 'option',
        multiplier: '100',
      }),
      skipped(10), // BUY (Ca.): a cancelled trade
    ],
  },
  'ibkr-activity.csv': {
    format: 'ibkr-activity',
    rows: [
      trade(7, { symbol: 'AAPL', side: 'buy', quantity: '100', price: '185.5', fee: '1', executedAt: '2024-01-05T10:30:00', assetClass: 'stock' }),
      trade(8, { symbol: 'AAPL', side: 'sell', quantity: '100', price: '186.25', fee: '1', executedAt: '2024-01-05T11:00:00', assetClass: 'stock' }),
      trade(9, { symbol: 'NVDA', side: 'sell', quantity: '1000', price: '490', fee: '5', executedAt: '2024-01-05T12:00:00', assetClass: 'stock' }),
      skipped(10), // SubTotal
      trade(11, { symbol: 'MESH4', side: 'buy', quantity: '2', price: '4750', fee: '1.24', executedAt: '2024-01-05T13:00:00', assetClass: 'future' }),
      trade(12, { symbol: 'MESH4', side: 'sell', quantity: '2', price: '4760.25', fee: '1.24', executedAt: '2024-01-05T13:30:00', assetClass: 'future' }),
      skipped(13), // Total
      skipped(14), // Total
    ],
  },
  'ibkr-activity-executions.csv': {
    format: 'ibkr-activity',
    rows: [
      skipped(4), // the Order line above its executions
      trade(5, { symbol: 'AAPL', side: 'buy', quantity: '60', price: '185.5', fee: '0.6', executedAt: '2024-01-05T10:30:00', assetClass: 'stock' }),
      trade(6, { symbol: 'AAPL', side: 'buy', quantity: '40', price: '185.5', fee: '0.4', executedAt: '2024-01-05T10:30:02', assetClass: 'stock' }),
      skipped(7),
      trade(8, { symbol: 'AAPL', side: 'sell', quantity: '100', price: '186.25', fee: '1', executedAt: '2024-01-05T11:00:00', assetClass: 'stock' }),
      skipped(9), // ClosedLot
      skipped(10), // SubTotal
      skipped(11), // the header again, with the Forex columns
      trade(12, { symbol: 'EUR.USD', side: 'sell', quantity: '20000', price: '1.0951', fee: '2', executedAt: '2024-01-05T12:00:00', assetClass: 'forex' }),
      skipped(13), // Total
    ],
  },
  'thinkorswim.csv': {
    format: 'thinkorswim',
    rows: [
      trade(9, { symbol: 'AAPL', side: 'buy', quantity: '100', price: '185.5', executedAt: '2024-01-05T10:30:00', assetClass: 'stock' }),
      trade(10, { symbol: 'AAPL', side: 'sell', quantity: '100', price: '186.25', executedAt: '2024-01-05T11:00:00', assetClass: 'stock' }),
      trade(11, { symbol: 'SPY240119C475', side: 'buy', quantity: '2', price: '3.1', executedAt: '2024-01-05T12:00:00', assetClass: 'option' }),
      trade(12, { symbol: 'QQQ240119C400', side: 'buy', quantity: '1', price: '2.5', executedAt: '2024-01-05T13:00:00', assetClass: 'option' }),
      // A spread's second leg leaves Exec Time empty: it takes the first leg's.
      trade(13, { symbol: 'QQQ240119C405', side: 'sell', quantity: '1', price: '1.3', executedAt: '2024-01-05T13:00:00', assetClass: 'option' }),
      trade(14, { symbol: '/ESH24', side: 'sell', quantity: '1', price: '4760', executedAt: '2024-01-05T14:00:00', assetClass: 'future' }),
      trade(15, { symbol: '/ESH24', side: 'buy', quantity: '1', price: '4755.5', executedAt: '2024-01-05T14:30:00', assetClass: 'future' }),
    ],
  },
  'tradovate.csv': {
    format: 'tradovate',
    rows: [
      trade(1, { symbol: 'MESH4', side: 'buy', quantity: '2', price: '4750.25', executedAt: '2024-01-05T10:30:01', externalId: '1001', assetClass: 'future' }),
      // Sells 3 against a long of 2: the flip.
      trade(2, { symbol: 'MESH4', side: 'sell', quantity: '3', price: '4755.75', executedAt: '2024-01-05T10:45:12', externalId: '1002', assetClass: 'future' }),
      trade(3, { symbol: 'NQH4', side: 'sell', quantity: '1', price: '16800.5', executedAt: '2024-01-05T11:00:00', externalId: '1003', assetClass: 'future' }),
      trade(4, { symbol: 'NQH4', side: 'buy', quantity: '1', price: '16790', executedAt: '2024-01-05T11:30:00', externalId: '1004', assetClass: 'future' }),
      skipped(5), // Canceled
      trade(6, { symbol: 'MESH4', side: 'buy', quantity: '1', price: '4752.75', executedAt: '2024-01-05T12:00:00', externalId: '1006', assetClass: 'future' }),
      skipped(7), // Working
    ],
  },
  'tradovate-fills.csv': {
    format: 'tradovate',
    rows: [
      trade(1, {
        symbol: 'MESH4',
        side: 'buy',
        quantity: '2',
        price: '4750.25',
        fee: '0.5',
        executedAt: '2024-01-05T10:30:01',
        externalId: '501',
        assetClass: 'future',
      }),
      trade(2, {
        symbol: 'MESH4',
        side: 'sell',
        quantity: '1',
        price: '4755.75',
        fee: '0.25',
        executedAt: '2024-01-05T10:45:12',
        externalId: '502',
        assetClass: 'future',
      }),
      trade(3, {
        symbol: 'MESH4',
        side: 'sell',
        quantity: '1',
        price: '4755.5',
        fee: '0.25',
        executedAt: '2024-01-05T10:45:12',
        externalId: '503',
        assetClass: 'future',
      }),
      trade(4, {
        symbol: 'NQH4',
        side: 'sell',
        quantity: '1',
        price: '16800.5',
        fee: '1.29',
        executedAt: '2024-01-05T11:00:00',
        externalId: '504',
        assetClass: 'future',
      }),
    ],
  },
  'ninjatrader.csv': {
    format: 'ninjatrader',
    rows: [
      trade(1, {
        symbol: 'ESH24',
        side: 'buy',
        quantity: '2',
        price: '4750.25',
        fee: '4.12',
        executedAt: '2024-01-05T10:30:00',
        externalId: 'a1',
        assetClass: 'future',
      }),
      trade(2, {
        symbol: 'ESH24',
        side: 'sell',
        quantity: '1',
        price: '4755.5',
        fee: '2.06',
        executedAt: '2024-01-05T10:45:00',
        externalId: 'a2',
        assetClass: 'future',
      }),
      trade(3, {
        symbol: 'ESH24',
        side: 'sell',
        quantity: '1',
        price: '4756',
        fee: '2.06',
        executedAt: '2024-01-05T10:45:01',
        externalId: 'a3',
        assetClass: 'future',
      }),
      trade(4, {
        symbol: 'NQH24',
        side: 'sell',
        quantity: '1',
        price: '16800.25',
        fee: '2.06',
        executedAt: '2024-01-05T13:15:00',
        externalId: 'a4',
        assetClass: 'future',
      }),
      trade(5, {
        symbol: 'NQH24',
        side: 'buy',
        quantity: '1',
        price: '16810',
        fee: '2.06',
        executedAt: '2024-01-05T13:20:00',
        externalId: 'a5',
        assetClass: 'future',
      }),
    ],
  },
  'webull.csv': {
    format: 'webull',
    rows: [
      trade(1, { symbol: 'AAPL', side: 'buy', quantity: '100', price: '185.5', executedAt: '2024-01-05T09:35:01-05:00' }),
      trade(2, { symbol: 'AAPL', side: 'sell', quantity: '100', price: '186.25', executedAt: '2024-01-05T10:00:02-05:00' }),
      trade(3, { symbol: 'TSLA', side: 'sell', quantity: '10', price: '240', executedAt: '2024-01-05T11:00:00-05:00' }),
      trade(4, { symbol: 'TSLA', side: 'buy', quantity: '10', price: '238.5', executedAt: '2024-01-05T11:30:00-05:00' }),
      skipped(5), // Cancelled
      // Partially Filled keeps what filled, at its average price.
      trade(6, { symbol: 'MSFT', side: 'buy', quantity: '3', price: '370.1', executedAt: '2024-01-05T12:00:05-05:00' }),
    ],
  },
  'metatrader5.csv': {
    format: 'metatrader5',
    rows: [
      skipped(1), // balance: the deposit
      trade(2, {
        symbol: 'EURUSD',
        side: 'buy',
        quantity: '0.5',
        price: '1.09512',
        fee: '3.5',
        executedAt: '2024-01-05T10:30:00',
        externalId: '1001',
        assetClass: 'forex',
        multiplier: '100000',
      }),
      trade(3, {
        symbol: 'EURUSD',
        side: 'sell',
        quantity: '0.5',
        price: '1.09612',
        fee: '3.5',
        executedAt: '2024-01-05T11:00:00',
        externalId: '1002',
        assetClass: 'forex',
        multiplier: '100000',
      }),
      trade(4, {
        symbol: 'XAUUSD',
        side: 'sell',
        quantity: '0.1',
        price: '2045.5',
        fee: '1.2',
        executedAt: '2024-01-05T12:00:00',
        externalId: '1003',
        assetClass: 'cfd',
        multiplier: '100',
      }),
      // Commission 1 + Fee 0.2; the Swap of −0.5 is financing, not a fee.
      trade(5, {
        symbol: 'XAUUSD',
        side: 'buy',
        quantity: '0.1',
        price: '2040.5',
        fee: '1.2',
        executedAt: '2024-01-05T12:30:00',
        externalId: '1004',
        assetClass: 'cfd',
        multiplier: '100',
      }),
    ],
  },
  'topstepx.csv': {
    format: 'topstepx',
    rows: [
      trade(1, {
        symbol: 'MESH4',
        side: 'buy',
        quantity: '2',
        price: '4750.25',
        executedAt: '2024-01-05T15:30:00.123Z',
        externalId: '9001-entry',
        assetClass: 'future',
      }),
      trade(1, {
        symbol: 'MESH4',
        side: 'sell',
        quantity: '2',
        price: '4755.75',
        fee: '1.48',
        executedAt: '2024-01-05T15:35:30.456Z',
        externalId: '9001-exit',
        assetClass: 'future',
      }),
      trade(2, {
        symbol: 'NQH4',
        side: 'sell',
        quantity: '1',
        price: '16800.5',
        executedAt: '2024-01-05T16:00:00Z',
        externalId: '9002-entry',
        assetClass: 'future',
      }),
      trade(2, {
        symbol: 'NQH4',
        side: 'buy',
        quantity: '1',
        price: '16810',
        fee: '0.74',
        executedAt: '2024-01-05T16:02:00Z',
        externalId: '9002-exit',
        assetClass: 'future',
      }),
    ],
  },
  'topstepx-offsets.csv': {
    format: 'topstepx',
    rows: [
      trade(1, {
        symbol: 'MNQH6',
        side: 'buy',
        quantity: '3',
        price: '25097.25',
        executedAt: '2025-12-18T13:26:13+01:00',
        externalId: '42817425-entry',
        assetClass: 'future',
      }),
      trade(1, {
        symbol: 'MNQH6',
        side: 'sell',
        quantity: '3',
        price: '25099.25',
        fee: '2.22',
        executedAt: '2025-12-18T13:26:46+01:00',
        externalId: '42817425-exit',
        assetClass: 'future',
      }),
      trade(2, {
        symbol: 'MNQH6',
        side: 'sell',
        quantity: '3',
        price: '25103',
        executedAt: '2025-12-18T13:29:08+01:00',
        externalId: '42817644-entry',
        assetClass: 'future',
      }),
      // Fees 2.22 + Commissions 0.50, on the exit.
      trade(2, {
        symbol: 'MNQH6',
        side: 'buy',
        quantity: '3',
        price: '25098.75',
        fee: '2.72',
        executedAt: '2025-12-18T13:29:39+01:00',
        externalId: '42817644-exit',
        assetClass: 'future',
      }),
      invalid(3, 'Type: "Flat" is neither Long nor Short'),
    ],
  },
  'generic.csv': {
    format: 'generic',
    rows: [
      trade(1, {
        symbol: 'AAPL',
        side: 'buy',
        quantity: '100',
        price: '185.5',
        fee: '1',
        executedAt: '2024-01-05T15:30:00Z',
        externalId: '-A1',
        note: '=1+1',
        tags: ['a;b', 'c'],
        stopPrice: '180',
      }),
      trade(2, {
        symbol: 'AAPL',
        side: 'sell',
        quantity: '60',
        price: '186.25',
        fee: '0.5',
        executedAt: '2024-01-05T11:00:00-05:00',
        externalId: 'x-2',
        note: 'part one, part two',
        tags: ['scalp', 'morning'],
        assetClass: 'stock',
        multiplier: '1',
      }),
      trade(3, { symbol: 'AAPL', side: 'sell', quantity: '40', price: '1186.3', fee: '0.5', executedAt: '2024-01-05T11:00:01' }),
      skipped(4), // a line of empty cells
      skipped(5), // an empty line
      trade(6, {
        symbol: 'ESH4',
        side: 'sell',
        quantity: '1',
        price: '4750.25',
        fee: '2.25',
        executedAt: '2024-01-05T12:00:00',
        externalId: 'x-4',
        assetClass: 'future',
        multiplier: '50',
        stopPrice: '4760',
      }),
      invalid(7, 'executedAt: "2024-02-30T12:30:00" is not a date and time this import reads'),
      invalid(8, 'the row does not have as many cells as the header'),
      // An unknown side word is passed on: the journal's check refuses the row, naming /side.
      trade(9, { symbol: 'TSLA', side: 'hold', quantity: '1', price: '100', fee: '0', executedAt: '2024-01-05T13:00:00' }),
    ],
  },
  'generic-eu.csv': {
    format: 'generic',
    rows: [
      trade(1, { symbol: 'SAP', side: 'Kauf', quantity: '10', price: '180.5', fee: '1.25', executedAt: '2024-01-05T10:30:00', note: 'erste' }),
      trade(2, { symbol: 'SAP', side: 'buy', quantity: '10', price: '180.5', fee: '1.25', executedAt: '2024-01-05T10:30:00', note: 'erste' }),
      trade(3, { symbol: 'SAP', side: 'sell', quantity: '10', price: '1182', fee: '2.5', executedAt: '2024-01-05T15:45:00' }),
    ],
  },
};

for (const [name, expected] of Object.entries(FIXTURES)) {
  test(`DESIGN §17: ${expected.format} — ${name} is detected from its header and read to the exact rows (row numbers: data rows, or file lines in statements)`, () => {
    const file = readBrokerFile(fixture(name));
    assert.equal(file.format, expected.format);
    assert.deepEqual(plain(file.rows), plain(expected.rows));
  });
}

test('DESIGN §17: format= reads a file as the named layout, the same rows as detection gives', () => {
  for (const [name, expected] of Object.entries(FIXTURES)) {
    const file = readBrokerFile(fixture(name), expected.format);
    assert.equal(file.format, expected.format, name);
    assert.deepEqual(plain(file.rows), plain(expected.rows), name);
  }
  // A generic header read as generic even when it would pass for another's.
  assert.equal(readBrokerFile('Symbol,Side,Quantity,Price,ExecutedAt\nAAPL,B,1,1,2024-01-05T10:00:00Z\n', ' Generic ').format, 'generic');
});

test('DESIGN §17: every layout is listed with its id, name, where to get the file and the columns it reads', () => {
  assert.deepEqual(
    IMPORT_FORMATS.map((f) => f.id),
    ['generic', 'ibkr-activity', 'thinkorswim', 'ibkr-flex', 'tradovate', 'ninjatrader', 'webull', 'metatrader5', 'topstepx'],
  );
  for (const f of IMPORT_FORMATS) assert.ok(f.name !== '' && f.how !== '' && f.columns.length >= 4, f.id);
  assert.deepEqual(IMPORT_FORMATS[0]?.columns, [
    'symbol',
    'side',
    'quantity',
    'price',
    'fee',
    'executedAt',
    'externalId',
    'note',
    'tags',
    'assetClass',
    'multiplier',
    'stopPrice',
  ]);
});

test('DESIGN §17: number forms — $, @, spaces and grouping dropped, () and − negative, decimal commas only in ; files, malformed grouping refused', () => {
  const cases: [text: string, decimalComma: boolean, digits: string | undefined, negative?: boolean][] = [
    ['$1,234.50', false, '1234.5'],
    ['(120.50)', false, '120.5', true],
    ['($1,200.00)', false, '1200', true],
    ['-3', false, '3', true],
    ['+100', false, '100'],
    ['@187.50', false, '187.5'],
    [' 4 808.250000000 ', false, '4808.25'],
    ['-1,000', false, '1000', true],
    ['1,234,567.5', false, '1234567.5'],
    ['12,5', false, undefined],
    ['1,23,456', false, undefined],
    ['1.2.3', false, undefined],
    ['12,5', true, '12.5'],
    ['1.234,56', true, '1234.56'],
    ['-1.234', true, '1234', true],
    ['4750.25', true, '4750.25'],
    ['0.5', true, '0.5'],
    ['1.234.567', true, '1234567'],
    ['1,2,3', true, undefined],
    ['€ 12,50', true, '12.5'],
    ['.00', false, '0'],
    ['-0', false, '0', false],
    ['0.00000001', false, '0.00000001'],
    ['1e2', false, undefined],
    ['', false, undefined],
    ['abc', false, undefined],
  ];
  for (const [text, comma, digits, negative = false] of cases) {
    const a = amountOf(text, comma);
    assert.deepEqual(
      a === undefined ? undefined : [a.digits, a.negative],
      digits === undefined ? undefined : [digits, negative],
      `${text} (${comma ? ';' : ','})`,
    );
  }
});

test('DESIGN §17: date forms — a zone or offset kept (abbreviations as offsets), none a wall-clock time without offset, impossible dates refused', () => {
  const cases: [text: string, iso: string | undefined, order?: 'month-first' | 'day-first'][] = [
    ['20240105;103000', '2024-01-05T10:30:00'],
    ['20240105 103000', '2024-01-05T10:30:00'],
    ['2024-01-05, 10:30:00', '2024-01-05T10:30:00'],
    ['1/5/24 10:30:00', '2024-01-05T10:30:00'],
    ['01/05/2024 10:30:01', '2024-01-05T10:30:01'],
    ['1/5/2024 10:30:00 AM', '2024-01-05T10:30:00'],
    ['1/5/2024 1:15:00 PM', '2024-01-05T13:15:00'],
    ['1/5/2024 12:05:00 AM', '2024-01-05T00:05:00'],
    ['1/5/2024 12:05:00 PM', '2024-01-05T12:05:00'],
    ['2024.01.05 10:30:00', '2024-01-05T10:30:00'],
    ['05.01.2024 10:30:00', '2024-01-05T10:30:00'],
    ['05/01/2024 10:30', '2024-01-05T10:30:00', 'day-first'],
    ['2024-01-05T10:30:00-05:00', '2024-01-05T10:30:00-05:00'],
    ['2024-01-05T10:30:00-0500', '2024-01-05T10:30:00-05:00'],
    ['2024-01-05T15:30:00.123+00:00', '2024-01-05T15:30:00.123Z'],
    ['2024-01-05 10:30:00', '2024-01-05T10:30:00'],
    ['2024-01-05T10:30', '2024-01-05T10:30:00'],
    ['12/18/2025 13:26:13 +01:00', '2025-12-18T13:26:13+01:00'],
    ['01/05/2024 10:30:00 EST', '2024-01-05T10:30:00-05:00'],
    ['07/05/2024 10:30:00 EDT', '2024-07-05T10:30:00-04:00'],
    ['01/05/2024 10:30:00 CST', '2024-01-05T10:30:00-06:00'],
    ['07/05/2024 10:30:00 CDT', '2024-07-05T10:30:00-05:00'],
    ['01/05/2024 10:30:00 MST', '2024-01-05T10:30:00-07:00'],
    ['07/05/2024 10:30:00 MDT', '2024-07-05T10:30:00-06:00'],
    ['01/05/2024 10:30:00 PST', '2024-01-05T10:30:00-08:00'],
    ['07/05/2024 10:30:00 PDT', '2024-07-05T10:30:00-07:00'],
    ['01/05/2024 10:30:00 UTC', '2024-01-05T10:30:00Z'],
    ['01/05/2024 10:30:00 GMT', '2024-01-05T10:30:00Z'],
    ['2/30/2024 10:00:00', undefined],
    ['20240230;103000', undefined],
    ['2023.02.29 10:00:00', undefined],
    ['1/5/2024 25:00:00', undefined],
    ['1/5/2024 13:15:00 PM', undefined],
    ['2024-01-05', undefined],
    ['01/05/2024 10:30:00 XYZ', undefined],
  ];
  for (const [text, iso, order] of cases) assert.equal(isoTime(text, order), iso, text);
});

test('DESIGN §17: slash dates are month first, unless a row of the file has a first number above 12: then day first for the whole file', () => {
  const times = (text: string): string[] => readBrokerFile(text).rows.map((r) => (r.kind === 'trade' ? r.trade.executedAt : r.kind));
  const head = 'symbol,side,quantity,price,executedAt\n';
  assert.deepEqual(times(`${head}A,buy,1,1,01/02/2024 10:00\nA,sell,1,1,03/04/2024 10:00\n`), ['2024-01-02T10:00:00', '2024-03-04T10:00:00']);
  assert.deepEqual(times(`${head}A,buy,1,1,01/02/2024 10:00\nA,sell,1,1,13/04/2024 10:00\n`), ['2024-02-01T10:00:00', '2024-04-13T10:00:00']);
  // A day-first file with a second number above 12 cannot be read either way: that row is invalid.
  assert.deepEqual(times(`${head}A,buy,1,1,13/02/2024 10:00\nA,sell,1,1,02/13/2024 10:00\n`), ['2024-02-13T10:00:00', 'invalid']);
});

test('DESIGN §17: side words — BUY/Buy/B/BOT/Buy to Cover/Cover/Buy to Open are buys, SELL/S/SLD/Sell Short/Short/Sell to Close sells; an unknown word passes through', () => {
  const cases: [string, string][] = [
    ['BUY', 'buy'],
    [' Buy', 'buy'],
    ['b', 'buy'],
    ['BOT', 'buy'],
    ['Buy to Cover', 'buy'],
    ['Cover', 'buy'],
    ['Buy  to  Open', 'buy'],
    ['Long', 'buy'],
    ['SELL', 'sell'],
    ['S', 'sell'],
    ['SLD', 'sell'],
    ['Sell Short', 'sell'],
    ['Short', 'sell'],
    ['Sell to Close', 'sell'],
    ['Kauf', 'Kauf'],
  ];
  for (const [word, side] of cases) assert.equal(sideWord(word), side, word);
  // A signed quantity gives the side where the layout has none, and the sign goes.
  const row = readBrokerFile('symbol,side,quantity,price,executedAt\nA,,-5,1,2024-01-05T10:00:00Z\nA,buy,-5,1,2024-01-05T10:00:00Z\n').rows;
  assert.deepEqual(plain(row), [
    { row: 1, kind: 'trade', trade: { symbol: 'A', side: 'sell', quantity: '5', price: '1', executedAt: '2024-01-05T10:00:00Z' } },
    { row: 2, kind: 'invalid', message: 'side: buy with a negative quantity' },
  ]);
});

test('DESIGN §17: bytes — UTF-8 with or without BOM, UTF-16 LE and BE with BOM, else Windows-1252 (€, é)', () => {
  const text = 'symbol,side,quantity,price,executedAt,note\nAAPL,buy,1,100,2024-01-05T10:30:00,café €5\n';
  const utf16le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
  const utf16be = Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()]);
  const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text, 'utf8')]);
  // Windows-1252: é is 0xE9, € is 0x80 (bytes that are not UTF-8).
  const cp1252 = Buffer.from(text.replace('é', '\u0000').replace('€', '\u0001'), 'latin1').map((b) => (b === 0 ? 0xe9 : b === 1 ? 0x80 : b));
  for (const [what, bytes] of [
    ['UTF-8', Buffer.from(text, 'utf8')],
    ['UTF-8 BOM', bom],
    ['UTF-16 LE', utf16le],
    ['UTF-16 BE', utf16be],
    ['Windows-1252', Buffer.from(cp1252)],
  ] as const) {
    assert.equal(decodeTradeFile(bytes), text, what);
    const [row] = readBrokerFile(decodeTradeFile(bytes)).rows;
    assert.equal(row?.kind === 'trade' ? row.trade.note : row, 'café €5', what);
  }
  // A BOM left in the text (read without decodeTradeFile) does not hide the first column.
  assert.equal(readBrokerFile(`\uFEFF${text}`).rows[0]?.kind, 'trade');
});

test('DESIGN §17: delimiters from the header — ; (decimal commas, dotted dates) and tab; in a , file a quoted comma groups thousands', () => {
  const semicolons = readBrokerFile('symbol;side;quantity;price;fee;executedAt\nAAPL;sell;1,5;1.234,56;-0,25;05.01.2024 09:30\n').rows;
  assert.deepEqual(plain(semicolons), [
    { row: 1, kind: 'trade', trade: { symbol: 'AAPL', side: 'sell', quantity: '1.5', price: '1234.56', fee: '0.25', executedAt: '2024-01-05T09:30:00' } },
  ]);
  const tabs = readBrokerFile('Instrument\tAction\tQuantity\tPrice\tTime\tID\tE/X\nMES 03-24\tSell\t1\t4,750.25\t1/5/2024 2:00:00 PM\tn1\tEntry\n');
  assert.equal(tabs.format, 'ninjatrader');
  assert.deepEqual(plain(tabs.rows), [
    {
      row: 1,
      kind: 'trade',
      trade: { symbol: 'MESH24', side: 'sell', quantity: '1', price: '4750.25', executedAt: '2024-01-05T14:00:00', externalId: 'n1', assetClass: 'future' },
    },
  ]);
  const commas = readBrokerFile('symbol,side,quantity,price,executedAt\nAAPL,buy,"1,000","1,234.5",2024-01-05T10:00:00Z\n').rows;
  assert.deepEqual(
    commas.map((r) => (r.kind === 'trade' ? [r.trade.quantity, r.trade.price] : r.kind)),
    [['1000', '1234.5']],
  );
});

test('DESIGN §17: MetaTrader 5 — balance, credit and deposit rows skipped; Volume stays lots; a stated Contract Size wins; an index CFD ×1', () => {
  const file = readBrokerFile(
    [
      'Time,Deal,Symbol,Type,Direction,Volume,Price,Order,Commission,Fee,Swap,Profit,Balance,Comment,Contract Size',
      '2024.01.05 08:00:00,1,,balance,,,,,0,0,0,5000,5000,Deposit,',
      '2024.01.05 08:01:00,2,,credit,,,,,0,0,0,100,5100,Bonus,',
      '2024.01.05 10:00:00,3,GBPJPY,sell,in,1.5,185.123,11,-7,0,0,0,5100,,',
      '2024.01.05 10:05:00,4,US30,buy,in,2,37500.5,12,0,-1,0,0,5100,,',
      '2024.01.05 10:10:00,5,EURUSD,buy,in,0.1,1.1,13,0,0,0,0,5100,,10000',
      ' , , , , ',
    ].join('\n'),
  );
  assert.equal(file.format, 'metatrader5');
  assert.deepEqual(plain(file.rows), [
    { row: 1, kind: 'skipped' },
    { row: 2, kind: 'skipped' },
    {
      row: 3,
      kind: 'trade',
      trade: {
        symbol: 'GBPJPY',
        side: 'sell',
        quantity: '1.5',
        price: '185.123',
        fee: '7',
        executedAt: '2024-01-05T10:00:00',
        externalId: '3',
        assetClass: 'forex',
        multiplier: '100000',
      },
    },
    {
      row: 4,
      kind: 'trade',
      trade: {
        symbol: 'US30',
        side: 'buy',
        quantity: '2',
        price: '37500.5',
        fee: '1',
        executedAt: '2024-01-05T10:05:00',
        externalId: '4',
        assetClass: 'cfd',
        multiplier: '1',
      },
    },
    {
      row: 5,
      kind: 'trade',
      trade: {
        symbol: 'EURUSD',
        side: 'buy',
        quantity: '0.1',
        price: '1.1',
        fee: '0',
        executedAt: '2024-01-05T10:10:00',
        externalId: '5',
        assetClass: 'forex',
        multiplier: '10000',
      },
    },
    { row: 6, kind: 'skipped' },
  ]);
});

test('DESIGN §17: statements number rows by file line, a quoted cell over two lines included; a header under title lines is found', () => {
  const tos = [
    'Account Statement for 1 since 1/5/24 through 1/5/24',
    '',
    'Account Trade History',
    ',Exec Time,Spread,Side,Qty,Pos Effect,Symbol,Exp,Strike,Type,Price,Net Price,Order Type',
    ',1/5/24 10:30:00,SINGLE,BUY,+1,TO OPEN,AAPL,19 JAN 24,190,PUT,"2.10",2.10,"LMT',
    'GTC"',
    ',1/5/24 10:31:00,STOCK,SELL,-5,TO OPEN,SPY,,,STOCK,470.00,470.00,MKT',
  ].join('\r\n');
  assert.deepEqual(plain(readBrokerFile(tos).rows), [
    {
      row: 5,
      kind: 'trade',
      trade: { symbol: 'AAPL240119P190', side: 'buy', quantity: '1', price: '2.1', executedAt: '2024-01-05T10:30:00', assetClass: 'option' },
    },
    { row: 7, kind: 'trade', trade: { symbol: 'SPY', side: 'sell', quantity: '5', price: '470', executedAt: '2024-01-05T10:31:00', assetClass: 'stock' } },
  ]);
  const titled = readBrokerFile(
    'Trade History Report\nAccount: 123\nTime,Deal,Symbol,Type,Direction,Volume,Price,Commission,Fee,Swap,Profit\n2024.01.05 10:00:00,9,EURUSD,buy,in,1,1.1,0,0,0,0\n',
  );
  assert.equal(titled.format, 'metatrader5');
  assert.equal(titled.rows.length, 1);
});

test('DESIGN §17: refusals are AppError VALIDATION_ERROR — unknown format id (/format), a header no layout reads (naming each layout and its columns), a layout’s columns missing, not CSV, more than 50,000 rows', () => {
  assert.throws(() => readBrokerFile('symbol,side,quantity,price,executedAt\n', 'schwab'), refusal('/format'));
  assert.throws(
    () => readBrokerFile('When,What\n1,2\n'),
    (err: unknown) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.code, 'VALIDATION_ERROR');
      for (const f of IMPORT_FORMATS) assert.ok(err.message.includes(f.id), f.id);
      assert.match(err.message, /generic \(.*\): the columns symbol, side, quantity, price, executedAt/);
      assert.match(err.message, /topstepx \(.*\): the columns ContractName, EnteredAt, ExitedAt, EntryPrice, ExitPrice, Size, Type/);
      return true;
    },
  );
  assert.throws(
    () => readBrokerFile(fixture('webull.csv'), 'tradovate'),
    (err: unknown) => err instanceof AppError && err.code === 'VALIDATION_ERROR' && /Tradovate.*lacks Contract, B\/S/.test(err.message),
  );
  assert.throws(() => readBrokerFile(fixture('webull.csv'), 'ibkr-activity'), refusal());
  assert.throws(() => readBrokerFile('symbol,side,quantity,price\nAAPL,buy,1,1\n'), refusal());
  assert.throws(() => readBrokerFile('symbol,Symbol,side,quantity,price,executedAt\n'), refusal());
  assert.throws(() => readBrokerFile('symbol,side,quantity,price,executedAt\n"AAPL,buy,1,1,2024-01-05T10:00:00Z\n'), refusal());
  assert.throws(() => readBrokerFile(''), refusal());
  assert.throws(() => readBrokerFile(' \n,,\n'), refusal());
  const row = 'AAPL,buy,1,1,2024-01-05T10:00:00Z\n';
  assert.equal(readBrokerFile(`symbol,side,quantity,price,executedAt\n${row.repeat(MAX_CSV_ROWS)}`).rows.length, MAX_CSV_ROWS);
  assert.throws(() => readBrokerFile(`symbol,side,quantity,price,executedAt\n${row.repeat(MAX_CSV_ROWS + 1)}`), refusal());
});
