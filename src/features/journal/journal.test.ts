// DESIGN §14, the journal's arithmetic: worked examples written by hand, every expected figure exact.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalUnits, divHalfEven, formatScaled, parseUnits, ratio } from './decimal.ts';
import { computeJournal, type SymbolFill } from '../../../test/kits/journal.ts';

let seq = 0;
/** A fill on `day` (its UTC noon, so the day and the instant agree), in the order written. */
function fill(
  symbol: string,
  side: 'buy' | 'sell',
  quantity: string,
  price: string,
  fee: string,
  day: string,
  instrument: { multiplier?: string; stopPrice?: string } = {},
): SymbolFill {
  const units = (t: string): bigint => parseUnits(t) ?? assert.fail(`bad decimal ${t}`);
  seq++;
  return {
    id: `00000000-0000-7000-8000-${String(seq).padStart(12, '0')}`,
    executedAt: Date.parse(`${day}T12:00:00Z`) + seq,
    tradingDay: day,
    hour: 12,
    symbol,
    side,
    quantity: units(quantity),
    price: units(price),
    fee: units(fee),
    multiplier: units(instrument.multiplier ?? '1'),
    stopPrice: instrument.stopPrice === undefined ? null : units(instrument.stopPrice),
    assetClass: instrument.multiplier === undefined ? 'stock' : 'future',
    tags: [],
  };
}

const account = (from: string, to: string, startingBalance = '1000') => ({ accountId: 'a', currency: 'USD', from, to, startingBalance });

describe('decimals (DESIGN §14)', () => {
  test('DESIGN 14: decimals are returned canonical: "12.50" → "12.5", "3.0" → "3", "007" → "7", no exponent', () => {
    assert.deepEqual(['12.50', '3.0', '007', '0.00000001', '0', '999999999999.99999999', '100'].map(canonicalUnits), [
      '12.5',
      '3',
      '7',
      '0.00000001',
      '0',
      '999999999999.99999999',
      '100',
    ]);
    for (const bad of ['1e3', '+1', '-1', '.5', '5.', '1.123456789', '1234567890123', '1,5', ' 1', '']) assert.equal(canonicalUnits(bad), undefined, bad);
  });

  test('DESIGN 14: rounding is half to even; ratios have no value without a denominator', () => {
    assert.deepEqual(
      [5n, 15n, 25n, -5n, -15n, 14n, 16n].map((n) => divHalfEven(n, 10n)),
      [0n, 2n, 2n, 0n, -2n, 1n, 2n],
    );
    assert.equal(formatScaled(-1n, 8), '-0.00000001');
    assert.equal(formatScaled(0n, 8), '0');
    assert.equal(ratio(2n, 3n), '0.6667');
    assert.equal(ratio(1n, 8n), '0.125');
    assert.equal(ratio(5n, 0n), null);
  });
});

describe('journal worked examples (DESIGN §14)', () => {
  test('DESIGN 14: a long bought once and sold in two parts is one losing round trip; fees count on their own days; drawdown from the range start', () => {
    const fills = [
      fill('AAPL', 'buy', '10', '100', '1', '2026-03-02'),
      fill('AAPL', 'sell', '4', '110', '1', '2026-03-03'),
      fill('AAPL', 'sell', '6', '90', '1', '2026-03-04'),
    ];
    const j = computeJournal(fills, account('2026-03-01', '2026-03-31'));
    assert.deepEqual(j.totals, {
      realizedPnl: '-20',
      fees: '3',
      netPnl: '-23',
      roundTrips: 1,
      wins: 0,
      losses: 1,
      winRate: '0',
      profitFactor: '0',
      expectancy: '-23',
      averageWin: null,
      averageLoss: '-23',
      largestWin: null,
      largestLoss: '-23',
      maxDrawdown: '61',
      averageR: null,
      expectancyR: null,
    });
    assert.deepEqual(j.days, [
      { tradingDay: '2026-03-02', realizedPnl: '0', fees: '1', netPnl: '-1', fills: 1, roundTrips: 0, wins: 0, losses: 0 },
      { tradingDay: '2026-03-03', realizedPnl: '40', fees: '1', netPnl: '39', fills: 1, roundTrips: 0, wins: 0, losses: 0 },
      { tradingDay: '2026-03-04', realizedPnl: '-60', fees: '1', netPnl: '-61', fills: 1, roundTrips: 1, wins: 0, losses: 1 },
    ]);
    assert.deepEqual(j.openPositions, []);
    assert.equal(j.balance, '977');
  });

  test('DESIGN 14: a short covered by a larger buy flips to long; the flip’s fee is split by quantity between the two round trips', () => {
    const fills = [
      fill('TSLA', 'sell', '5', '200', '2', '2026-04-01'),
      // Covers 5 (realizes (200 − 190) × 5 = 50) and opens 3 long; fee 4 → 2.5 closing, 1.5 opening.
      fill('TSLA', 'buy', '8', '190', '4', '2026-04-02'),
      fill('TSLA', 'sell', '3', '195', '0.3', '2026-04-03'),
    ];
    const j = computeJournal(fills, account('2026-04-01', '2026-04-03'));
    assert.deepEqual(j.totals, {
      realizedPnl: '65',
      fees: '6.3',
      netPnl: '58.7',
      roundTrips: 2,
      wins: 2,
      losses: 0,
      winRate: '1',
      profitFactor: null,
      // Round trips: 50 − 2 − 2.5 = 45.5 and 15 − 1.5 − 0.3 = 13.2.
      expectancy: '29.35',
      averageWin: '29.35',
      averageLoss: null,
      largestWin: '45.5',
      largestLoss: null,
      maxDrawdown: '2',
      averageR: null,
      expectancyR: null,
    });
    assert.deepEqual(
      j.days.map((d) => [d.tradingDay, d.realizedPnl, d.fees, d.netPnl, d.roundTrips, d.wins]),
      [
        ['2026-04-01', '0', '2', '-2', 0, 0],
        ['2026-04-02', '50', '4', '46', 1, 1],
        ['2026-04-03', '15', '0.3', '14.7', 1, 1],
      ],
    );
    const mid = computeJournal(fills, account('2026-04-01', '2026-04-02'));
    assert.deepEqual(mid.openPositions, [{ symbol: 'TSLA', quantity: '3', averagePrice: '190', openedAt: new Date(fills[1]?.executedAt ?? 0).toISOString() }]);
  });

  test('DESIGN 14: a flip’s closing fee share is rounded half to even at 8 places and the opening share is the rest; a zero-net round trip is neither win nor loss', () => {
    const fills = [
      fill('Y', 'buy', '1', '5', '0', '2026-05-04'),
      // Fee 0.00000001 over 1 closing + 1 opening: the closing half (0.000000005) rounds to 0 (even).
      fill('Y', 'sell', '2', '5', '0.00000001', '2026-05-04'),
      fill('Y', 'buy', '1', '5', '0', '2026-05-05'),
    ];
    const j = computeJournal(fills, account('2026-05-01', '2026-05-31'));
    assert.deepEqual([j.totals.roundTrips, j.totals.wins, j.totals.losses], [2, 0, 1]);
    // Expectancy: (0 − 0.00000001) / 2 = −0.000000005, half to even → 0.
    assert.deepEqual([j.totals.largestLoss, j.totals.expectancy, j.totals.winRate, j.totals.profitFactor], ['-0.00000001', '0', '0', '0']);
    // 2 round trips, net −0.00000001 together: −0.000000005 each, half to even → 0.
    const two = computeJournal(
      [
        fill('Q', 'buy', '1', '1', '0', '2026-06-01'),
        fill('Q', 'sell', '1', '1', '0.00000001', '2026-06-01'),
        fill('Q', 'buy', '1', '1', '0', '2026-06-01'),
        fill('Q', 'sell', '1', '1', '0', '2026-06-01'),
      ],
      account('2026-06-01', '2026-06-01'),
    );
    assert.deepEqual([two.totals.roundTrips, two.totals.expectancy, two.totals.netPnl], [2, '0', '-0.00000001']);
  });

  test('DESIGN 14: amounts are exact to 16 places and written half to even at 8', () => {
    const half = computeJournal(
      [fill('Z', 'buy', '0.5', '1.00000001', '0', '2026-07-01'), fill('Z', 'sell', '0.5', '1.00000002', '0', '2026-07-01')],
      account('2026-07-01', '2026-07-01'),
    );
    assert.equal(half.totals.realizedPnl, '0', '0.000000005 → 0 (even)');
    assert.equal(half.totals.largestWin, '0', 'a win of 0.000000005 is still a win');
    assert.equal(half.totals.wins, 1);
    const oneAndHalf = computeJournal(
      [fill('Z', 'buy', '1.5', '1.00000001', '0', '2026-07-01'), fill('Z', 'sell', '1.5', '1.00000002', '0', '2026-07-01')],
      account('2026-07-01', '2026-07-01'),
    );
    assert.equal(oneAndHalf.totals.realizedPnl, '0.00000002', '0.000000015 → 0.00000002 (even)');
    const big = computeJournal(
      [
        fill('B', 'buy', '999999999999.99999999', '999999999999.99999999', '0', '2026-07-01'),
        fill('B', 'sell', '999999999999.99999999', '0', '0', '2026-07-01'),
      ],
      account('2026-07-01', '2026-07-01'),
    );
    // −(10^12 − 10^-8)² = −(10^24 − 2·10^4 + 10^-16): exact, then half to even at 8 places.
    assert.equal(big.totals.realizedPnl, '-999999999999999999980000');
  });

  test('DESIGN 14: open positions are those after the last fill on or before `to`, FIFO cost averaged; balance counts every fill', () => {
    const fills = [
      fill('MSFT', 'buy', '10', '100', '0', '2026-08-03'),
      fill('MSFT', 'buy', '10', '110', '0', '2026-08-04'),
      fill('MSFT', 'sell', '5', '120', '0', '2026-08-05'),
      fill('NVDA', 'sell', '3', '10', '0', '2026-08-05'),
      fill('NVDA', 'sell', '1', '11', '0', '2026-08-05'),
    ];
    const opened = new Date(fills[0]?.executedAt ?? 0).toISOString();
    const early = computeJournal(fills, account('2026-08-01', '2026-08-04'));
    assert.deepEqual(early.openPositions, [{ symbol: 'MSFT', quantity: '20', averagePrice: '105', openedAt: opened }]);
    assert.equal(early.balance, '1100', 'balance: starting balance + all-time net, whatever `to`');
    assert.equal(early.totals.realizedPnl, '0');
    const late = computeJournal(fills, account('2026-08-01', '2026-08-05'));
    assert.deepEqual(late.openPositions, [
      // FIFO: the sale closed 5 of the lot at 100; open: 5 × 100 + 10 × 110 = 1600 over 15.
      { symbol: 'MSFT', quantity: '15', averagePrice: '106.66666667', openedAt: opened },
      { symbol: 'NVDA', quantity: '-4', averagePrice: '10.25', openedAt: new Date(fills[3]?.executedAt ?? 0).toISOString() },
    ]);
    assert.deepEqual(computeJournal(fills, account('2026-07-01', '2026-07-31')).openPositions, []);
  });

  test('DESIGN 14: positions of several symbols are matched apart; a range with no fills has zero totals and null ratios', () => {
    const fills = [
      fill('A', 'buy', '1', '10', '0', '2026-09-01'),
      fill('B', 'buy', '1', '20', '0', '2026-09-01'),
      fill('A', 'sell', '1', '15', '0', '2026-09-02'),
      fill('B', 'sell', '1', '18', '0', '2026-09-02'),
    ];
    const j = computeJournal(fills, account('2026-09-01', '2026-09-30'));
    assert.deepEqual([j.totals.realizedPnl, j.totals.wins, j.totals.losses, j.totals.profitFactor, j.totals.winRate], ['3', 1, 1, '2.5', '0.5']);
    const empty = computeJournal(fills, account('2027-01-01', '2027-01-31'));
    assert.deepEqual(empty.totals, {
      realizedPnl: '0',
      fees: '0',
      netPnl: '0',
      roundTrips: 0,
      wins: 0,
      losses: 0,
      winRate: null,
      profitFactor: null,
      expectancy: null,
      averageWin: null,
      averageLoss: null,
      largestWin: null,
      largestLoss: null,
      maxDrawdown: '0',
      averageR: null,
      expectancyR: null,
    });
    assert.deepEqual(empty.days, []);
    assert.equal(empty.balance, '1003');
  });
});
