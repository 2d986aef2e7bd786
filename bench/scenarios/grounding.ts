// Row `grounding` (DESIGN §18): the check a turn runs at its end, in process, on a 4,000-character
// reply full of figures against a realistic turn's tool results.
import { performance } from 'node:perf_hooks';
import type { Harness } from '../lib/harness.ts';
import type { Row } from '../lib/report.ts';
import { distribution, ms } from '../lib/stats.ts';
import { findFigures, groundReply } from '../../src/features/conversations/grounding.ts';
import type { StoredPart } from '../../src/features/conversations/parts.ts';

const REPLY_CHARS = 4000;
const GOAL_P99_MS = 1;

/** A quote, 250 daily bars, a journal of 60 days with its totals and positions, a position size: the tools a busy turn calls. */
function toolResults(): StoredPart[] {
  const bar = (i: number): Record<string, unknown> => {
    const c = 232.8 * (1 + 0.01 * Math.sin(i / 7));
    return {
      t: `2025-${String((i % 12) + 1).padStart(2, '0')}-10`,
      o: +(c - 0.4).toFixed(2),
      h: +(c + 1.2).toFixed(2),
      l: +(c - 1.1).toFixed(2),
      c: +c.toFixed(2),
      v: 40_000_000 + i * 9_731,
    };
  };
  const day = (i: number): Record<string, unknown> => ({
    tradingDay: `2026-02-${String((i % 28) + 1).padStart(2, '0')}`,
    realizedPnl: String(((i * 37.5) % 900) - 300),
    fees: String((i % 5) + 0.5),
    netPnl: String(((i * 37.5) % 900) - 300 - (i % 5) - 0.5),
    fills: (i % 9) + 1,
    roundTrips: i % 4,
    wins: i % 3,
    losses: i % 2,
  });
  const result = (id: string, name: string, body: Record<string, unknown>): StoredPart => ({ type: 'tool_result', id, name, ok: true, result: body });
  return [
    result('call_quote', 'get_quote', {
      symbol: 'AAPL',
      price: 232.8,
      change: 0.98,
      changePercent: 0.4227,
      open: 232.05,
      high: 234,
      low: 230.72,
      volume: 44_489_128,
      previousClose: 231.82,
      asOf: '2026-11-28T14:30:00.000Z',
      currency: 'USD',
    }),
    result('call_history', 'get_price_history', { symbol: 'AAPL', interval: 'day', bars: Array.from({ length: 250 }, (_, i) => bar(i)) }),
    result('call_journal', 'get_journal', {
      totals: {
        realizedPnl: '4210.5',
        fees: '182.25',
        netPnl: '4028.25',
        roundTrips: 96,
        wins: 58,
        losses: 38,
        winRate: '0.6042',
        profitFactor: '1.84',
        averageR: '0.42',
      },
      days: Array.from({ length: 60 }, (_, i) => day(i)),
      openPositions: [
        { symbol: 'AAPL', quantity: '5', averagePrice: '120' },
        { symbol: 'MSFT', quantity: '12', averagePrice: '401.3' },
      ],
      balance: '29028.25',
    }),
    result('call_size', 'position_size', {
      shares: '100',
      riskAmount: '250.98',
      perShareRisk: '2.5',
      multiplier: '1',
      positionValue: '23280',
      balance: '25098',
    }),
  ];
}

/** 4,000 characters of an advisor's answer: quoted, rounded and invented figures between dates, times, lists and tickers. */
function reply(): string {
  const lines = [
    '1. AAPL trades at $232.80, up 0.98 (0.42%) on 44.5M shares as of Nov 28, 14:30 ET.',
    '2. Your net P&L is +$4,028.25 over 96 round trips, a 60.4% win rate and a 1.84 profit factor; fees were $182.25.',
    '3) You hold 5 AAPL at $120 and 12 MSFT at $401.30; your balance is $29,028.25 (about 29k).',
    '- Risking 1% ($250.98) with a $2.50 stop means 100 shares, $23,280 of position, a -1R loss of (250.98) at worst.',
    '- The 50-day average near $231.10 and resistance at $241.50 (invented) frame a 2.5R target on 2026-12-05.',
    '- On 11/28 NQZ5 and ES moved -3.5k and 1.2M contracts traded; €12,50 and 12,5 € are euro prices in 2026.',
  ];
  let text = '';
  for (let i = 0; text.length < REPLY_CHARS; i++) text += `${lines[i % lines.length]}\n`;
  return text.slice(0, REPLY_CHARS);
}

export async function grounding(h: Harness): Promise<Row> {
  const runs = h.quick ? 2_000 : 10_000;
  const parts = toolResults();
  const text = reply();
  const user = 'Size a 1% risk on AAPL with a stop at 230.3; I have $25,098.';
  const figures = findFigures(text).length;
  const check = groundReply(text, parts, user);
  for (let i = 0; i < 500; i++) groundReply(text, parts, user);
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    groundReply(text, parts, user);
    wall.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  const d = distribution(wall);
  const onCpu = distribution(cpu);
  return {
    id: 'grounding',
    title: 'Grounding check at a turn’s end',
    service: `p50 ${ms(d.p50, 3)} ms · p99 ${ms(d.p99, 3)} ms · max ${ms(d.max, 3)} ms`,
    baseline: 'none (the check is new: its whole time is added)',
    result: `p99 ${ms(d.p99, 3)} ms for ${figures} figures (${check.matched} matched)`,
    goal: `p99 ≤ ${GOAL_P99_MS} ms`,
    met: d.p99 <= GOAL_P99_MS,
    how:
      `groundReply (src/features/conversations/grounding.ts) in the bench process, ${runs} runs after 500 warm-up ones, each timed ` +
      `alone with performance.now() (wall time, the goal's judge): a ${REPLY_CHARS}-character reply (${figures} figures between dates, times, list numbers, tickers ` +
      'and euro amounts) against a turn that called get_quote, get_price_history (250 daily bars), get_journal (60 days, totals, two ' +
      'positions) and position_size, and the user’s message. One regex pass finds the figures; each source value is rounded once per ' +
      'decimals count a figure asks for (a Map of rounded values per count), so the time grows with figures + source values, not their product.',
    notes: [
      `Grounding check: ${check.figures} figures, ${check.matched} matched, ${check.unmatched.length} unmatched; CPU time of the process ` +
        `per run p50 ${ms(onCpu.p50, 3)} ms, p99 ${ms(onCpu.p99, 3)} ms (what the check costs when the machine's other work preempts it)`,
    ],
  };
}
