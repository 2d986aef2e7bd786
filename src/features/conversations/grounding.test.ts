// DESIGN §18's check as a pure function: the figure forms it finds (and what it leaves alone), and
// the matching rule. End to end in each wire protocol: grounding-protocols.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { findFigures, groundReply } from './grounding.ts';
import type { StoredPart } from './parts.ts';

const texts = (s: string): string[] => findFigures(s).map((f) => f.text);

describe('DESIGN §18: the figures of a reply', () => {
  const FORMS: [string, string, string[]][] = [
    ['a dollar amount with groups and cents', 'Last at $1,234.56 today', ['$1,234.56']],
    ['a euro amount with a decimal point', 'a fee of €12 and €12.5', ['€12', '€12.5']],
    ['a pound and a yen amount', '£3.20 or ¥150', ['£3.20', '¥150']],
    ['a negative amount, sign before or after the symbol', 'P&L -$120.50 or $-120.50 or −5', ['-$120.50', '$-120.50', '−5']],
    ['an accounting negative: parentheses around an amount', 'net (120.50) and ($98)', ['(120.50)', '($98)']],
    ['parentheses around a signed figure or a percentage are prose', 'up $3 (+2.5%) or (2.5%)', ['$3', '+2.5%', '2.5%']],
    ['k / M / B scales', '-3.5k, 1.2M shares, $2B', ['-3.5k', '1.2M', '$2B']],
    ['percentages, with or without a space', '12.5% and 3 % and -0.75%', ['12.5%', '3 %', '-0.75%']],
    ['R-multiples', 'a 2.5R winner and a -1R loser', ['2.5R', '-1R']],
    ['plain prices and quantities', 'buy 100 shares at 187.25', ['100', '187.25']],
    ['a leading-dot decimal', 'a beta of .85', ['.85']],
    [
      'a euro amount with a decimal comma (1–2 digits after the comma)',
      '€12,50 and 12,5 € and 1.234,56 € and -€3,5',
      ['€12,50', '12,5 €', '1.234,56 €', '-€3,5'],
    ],
    ['a comma followed by three digits is a group, with or without €', '€1,234 and 1,234', ['€1,234', '1,234']],
    ['a number ending a sentence', 'It closed at 120.', ['120']],
    ['a range: two figures', 'between 120-125', ['120', '125']],
  ];
  for (const [rule, text, figures] of FORMS) {
    test(`DESIGN §18: ${rule}`, () => assert.deepEqual(texts(text), figures));
  }

  const NOT_FIGURES: [string, string][] = [
    ['ISO dates and date-times', 'on 2026-11-28 and 2026-11-28T14:30:00Z and 2026-11'],
    ['slash and dotted dates', 'on 11/28, 11/28/2026 and 28.11.2026'],
    ['month-name dates', 'on Nov 28, Nov. 28th, 2026, 28 November 2026 and March 3'],
    ['times and colon ratios', 'at 14:30, 9:30am, 4 pm, 14:30:15 and a 1:2.5 risk-reward'],
    ['list numbers at a line start', '1. first\n2) second\n  3. third'],
    ['tickers and identifiers', 'ES, NQZ5, AAPL, Q3, H1, v2'],
    ['years', 'in 2026, since 1999'],
    ['digits inside words and digit-led words', '3rd trade, 10x leverage, 5min chart, 24h, 1.2.3'],
    ['hyphenated compounds', 'the 50-day and 200-day averages, a 52-week high'],
    ['index names', 'the S&P 500, Nasdaq 100 and Russell 2000'],
    ['numbers after # and ambiguous comma pairs', 'trade #3, 1,5%'],
  ];
  for (const [rule, text] of NOT_FIGURES) {
    test(`DESIGN §18: not a figure: ${rule}`, () => assert.deepEqual(texts(text), []));
  }

  test('DESIGN §18: offsets are UTF-16 indices into the text, end exclusive', () => {
    const text = '📈 Up 💶 €12,50 then $3';
    for (const f of findFigures(text)) assert.equal(text.slice(f.start, f.end), f.text);
    assert.deepEqual(
      findFigures(text).map((f) => [f.start, f.end]),
      [
        [9, 15],
        [21, 23],
      ],
    );
  });
});

describe('DESIGN §18: matching a figure to its sources', () => {
  const result = (id: string, body: Record<string, unknown>): StoredPart => ({ type: 'tool_result', id, name: 'get_quote', ok: true, result: body });
  const quote = result('call_q', {
    symbol: 'AAPL',
    price: 187.254,
    change: -3.5,
    changePercent: -1.8345,
    volume: 1_234_567,
    asOf: '2026-11-28T14:30:00Z',
  });
  const journal = result('call_j', { totals: { netPnl: '-120.5', winRate: 0.625, roundTrips: 8, avgR: '2.456' }, openPositions: [{ quantity: '5' }] });
  const MATCHING: [string, string, string | null][] = [
    ['exactly as given', 'AAPL at 187.254', 'call_q'],
    ['rounded to the figure’s decimals', 'AAPL at $187.25', 'call_q'],
    ['rounded to a whole number', 'about $187', 'call_q'],
    ['with more decimals than the source', 'a change of 3.50', 'call_q'],
    ['in absolute value (a loss quotes a negative)', 'a loss of $120.50', 'call_j'],
    ['an accounting negative', 'net (120.50)', 'call_j'],
    ['a percentage as given', 'down 1.83%', 'call_q'],
    ['a percentage of a ratio × 100', 'a 62.5% win rate', 'call_j'],
    ['a rounded percentage of a ratio', 'a 63% win rate', 'call_j'],
    ['a k-scaled figure', '1,235k shares', 'call_q'],
    ['an M-scaled figure', '1.2M shares traded', 'call_q'],
    ['an R-multiple from a numeric string', 'an average of 2.46R', 'call_j'],
    ['a value nested in an array', 'you hold 5 shares', 'call_j'],
    ['a figure of the user’s own message', 'your 250 shares', null],
    ['a scaled figure of the user’s message', 'your $25,000 account', null],
  ];
  for (const [rule, reply, source] of MATCHING) {
    test(`DESIGN §18: a figure matches ${rule}`, () => {
      const g = groundReply(reply, [quote, journal], 'I hold 250 shares in a $25k account');
      assert.deepEqual([g.figures, g.matched, g.unmatched, g.sources.map((s) => s.toolCallId)], [1, 1, [], [source]]);
    });
  }

  const NOT_MATCHING: [string, string][] = [
    ['an invented price', 'resistance at $191.40'],
    ['a figure rounded the wrong way', 'AAPL at 187.26'],
    ['a figure truncated, not rounded', 'an average of 2.45R'],
    ['a percentage that is neither a value nor a ratio × 100', 'a 6.25% win rate'],
    ['a date-like string of a tool result as a number', 'it was 28'],
  ];
  for (const [rule, reply] of NOT_MATCHING) {
    test(`DESIGN §18: no match: ${rule}`, () => {
      const g = groundReply(reply, [quote, journal], 'hello');
      assert.equal(g.figures, 1);
      assert.equal(g.matched, 0);
      assert.equal(g.unmatched.length, 1);
    });
  }

  test('DESIGN §18: the first tool call holding a value is its source; a failed result is no source; counts and offsets add up', () => {
    const failed: StoredPart = { type: 'tool_result', id: 'call_x', name: 'get_quote', ok: false, error: { code: 'UNKNOWN_SYMBOL', message: 'no 191.4' } };
    const again = result('call_q2', { price: 187.254 });
    const reply = 'AAPL $187.25 vs 191.4 target';
    const g = groundReply(reply, [failed, quote, again], '');
    assert.deepEqual(g, {
      figures: 2,
      matched: 1,
      unmatched: [{ text: '191.4', start: 16, end: 21 }],
      sources: [{ text: '$187.25', start: 5, end: 12, toolCallId: 'call_q' }],
    });
  });

  test('DESIGN §18: a value at a half matches either rounding (half up or half to even)', () => {
    const half = result('call_h', { price: 2.345, other: 0.125 });
    assert.equal(groundReply('2.35 and 2.34 and 0.13 and 0.12', [half], '').matched, 4);
  });

  test('DESIGN §18: a reply with no figures', () => {
    assert.deepEqual(groundReply('Buy low, sell high on Nov 28.', [quote], '100'), { figures: 0, matched: 0, unmatched: [], sources: [] });
  });
});
