// DESIGN §14, §17, the journal of random fill sequences (a seeded generator, so a failure replays):
// 1. against a deliberately naive implementation written here — quantities expanded into unit lots of
//    0.01, multipliers of 2 places, amounts as BigInt counts of 10^-12, its own rounding — never sharing
//    code with the service; the same model's round trips (R multiples from planned stops) give the
//    what-ifs and reports the service must equal;
// 2. the cash identity: what was received less what was paid equals realized P&L less the cost of the
//    longs still open plus the proceeds of the shorts still open (fees on both sides);
// 3. the service's own path — rollups kept on write, fills created out of order and deleted through
//    HTTP — against the journal computed from every fill.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { parseUnits } from './decimal.ts';
import { applyFill, emptyBook, type Book } from './fifo.ts';
import { computeJournal, type SymbolFill } from '../../../test/kits/journal.ts';
import type { JournalDto, TradeDto } from './schemas.ts';

/** mulberry32: a small seeded generator. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface RandomFill {
  readonly id: string;
  readonly symbol: string;
  readonly side: 'buy' | 'sell';
  /** Decimal strings: quantities and prices with 2 places, fees with up to 8. */
  readonly quantity: string;
  readonly price: string;
  readonly fee: string;
  readonly executedAt: number;
  readonly tradingDay: string;
  /** DESIGN §17: each symbol's multiplier (2 places), a stop on some fills, tags on some. */
  readonly multiplier: string;
  readonly assetClass: 'stock' | 'future';
  readonly stopPrice: string | null;
  readonly tags: readonly string[];
}

/** ×1 stock, ×50 and ×0.5 futures (ES-like and MYM-like). */
const INSTRUMENTS = {
  AAA: { multiplier: '1', assetClass: 'stock' },
  BBB: { multiplier: '50', assetClass: 'future' },
  CCC: { multiplier: '0.5', assetClass: 'future' },
} as const;
const TAGS = ['revenge', 'setup-a', 'news'] as const;

const BASE = Date.parse('2026-01-05T00:00:00Z');
const dayOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

function randomFills(random: () => number, n: number): RandomFill[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const cents = (lo: number, hi: number): string => (Math.round((lo + random() * (hi - lo)) * 100) / 100).toFixed(2);
  const out: RandomFill[] = [];
  for (let i = 0; i < n; i++) {
    // A few instants repeat: fills at one instant are applied in id order.
    const minute = random() < 0.15 && out.length > 0 ? (pick(out).executedAt - BASE) / 60_000 : Math.floor(random() * 12 * 24 * 60);
    const executedAt = BASE + minute * 60_000;
    const symbol = pick(['AAA', 'BBB', 'CCC'] as const);
    const price = cents(1, 50);
    out.push({
      id: `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`,
      symbol,
      side: random() < 0.5 ? 'buy' : 'sell',
      quantity: cents(0.01, 6),
      price,
      fee: random() < 0.3 ? `0.0000000${Math.floor(random() * 10)}` : cents(0, 2),
      executedAt,
      tradingDay: dayOf(executedAt),
      ...INSTRUMENTS[symbol],
      // A stop at the price itself is no risk: the trip then has no R.
      stopPrice: random() < 0.5 ? null : random() < 0.1 ? price : cents(1, 50),
      tags: TAGS.filter(() => random() < 0.25),
    });
  }
  return out;
}

// ── The naive journal: unit lots of 0.01, amounts in units of 10^-10. ─────────────────────────────

const TEN = 10n;
/** A decimal string as an integer count of 10^-places (the naive way: pad the fraction). */
function fixed(text: string, places: number): bigint {
  const [whole = '0', fraction = ''] = text.split('.');
  return BigInt(whole + fraction.padEnd(places, '0'));
}
function roundEven(n: bigint, d: bigint): bigint {
  const neg = n < 0n !== d < 0n;
  const a = n < 0n ? -n : n;
  const b = d < 0n ? -d : d;
  let q = a / b;
  const r = a - q * b;
  if (r * 2n > b || (r * 2n === b && q % 2n === 1n)) q += 1n;
  return neg ? -q : q;
}
/** An integer count of 10^-places written as a canonical decimal. */
function write(v: bigint, places: number): string {
  const neg = v < 0n;
  let s = (neg ? -v : v).toString();
  while (s.length <= places) s = `0${s}`;
  let text = places === 0 ? s : `${s.slice(0, -places)}.${s.slice(-places)}`;
  if (text.includes('.')) text = text.replace(/0+$/, '').replace(/\.$/, '');
  return neg && text !== '0' ? `-${text}` : text;
}
/** Amount in 10^-12 → money string (half to even at 8 places). */
const money12 = (v: bigint): string => write(roundEven(v, 10_000n), 8);

interface UnitLot {
  readonly price: bigint;
  /** 10^-2. */
  readonly multiplier: bigint;
}

/** A round trip as the model closes it: amounts in 10^-12. */
export interface NaiveTrip {
  readonly symbol: string;
  readonly side: 'long' | 'short';
  readonly openDay: string;
  readonly closeDay: string;
  readonly openHour: number;
  readonly holdSeconds: number;
  readonly realized: bigint;
  readonly fees: bigint;
  readonly net: bigint;
  readonly risk: bigint | null;
  readonly fills: number;
  readonly tags: readonly string[];
}

interface NaiveRun {
  readonly days: Map<string, { realized: bigint; fees: bigint; fills: number; trips: bigint[] }>;
  readonly trips: NaiveTrip[];
  readonly allTime: bigint;
  readonly snapshot: { symbol: string; units: number; sign: number; priceSum: bigint; openedAt: number }[];
}

function naiveRun(fills: readonly RandomFill[], to: string): NaiveRun {
  const ordered = [...fills].sort((a, b) => a.executedAt - b.executedAt || (a.id < b.id ? -1 : 1));
  let last = -1;
  ordered.forEach((f, i) => {
    if (f.tradingDay <= to) last = i;
  });
  interface Open {
    sign: number;
    lots: UnitLot[];
    realized: bigint;
    fees: bigint;
    openedAt: number;
    openDay: string;
    risk: bigint | null;
    fills: number;
    tags: Set<string>;
  }
  const books = new Map<string, Open>();
  const days: NaiveRun['days'] = new Map();
  const trips: NaiveTrip[] = [];
  let allTime = 0n;
  let snapshot: NaiveRun['snapshot'] = [];
  const abs = (v: bigint): bigint => (v < 0n ? -v : v);
  ordered.forEach((f, index) => {
    const book = books.get(f.symbol) ?? { sign: 0, lots: [], realized: 0n, fees: 0n, openedAt: 0, openDay: '', risk: null, fills: 0, tags: new Set() };
    books.set(f.symbol, book);
    const dir = f.side === 'buy' ? 1 : -1;
    const units = Number(fixed(f.quantity, 2));
    const price = fixed(f.price, 8);
    const multiplier = fixed(f.multiplier, 2);
    const feeUnits = fixed(f.fee, 8);
    const fee12 = feeUnits * 10_000n;
    const day = days.get(f.tradingDay) ?? { realized: 0n, fees: 0n, fills: 0, trips: [] };
    days.set(f.tradingDay, day);
    day.fills++;
    day.fees += fee12;
    const startsFlat = book.lots.length === 0;
    if (!startsFlat) {
      book.fills++;
      for (const t of f.tags) book.tags.add(t);
    }
    const openFresh = (openedUnits: number, fees: bigint): void => {
      book.sign = dir;
      book.openedAt = f.executedAt;
      book.openDay = f.tradingDay;
      book.realized = 0n;
      book.fees = fees;
      book.fills = 1;
      book.tags = new Set(f.tags);
      const stop = f.stopPrice === null ? null : abs(price - fixed(f.stopPrice, 8)) * BigInt(openedUnits) * multiplier;
      book.risk = stop === 0n ? null : stop;
    };
    let realized = 0n;
    let closedUnits = 0;
    let closedTrip = false;
    for (let u = 0; u < units; u++) {
      if (book.sign === -dir && book.lots.length > 0) {
        const lot = book.lots.shift() as UnitLot;
        // One unit is 0.01: (sell − buy) in 10^-8 × 0.01 × multiplier (10^-2) = 10^-12.
        realized += (dir === -1 ? price - lot.price : lot.price - price) * lot.multiplier;
        closedUnits++;
        if (book.lots.length === 0) {
          closedTrip = true;
          break;
        }
      } else break;
    }
    const rest = units - closedUnits;
    day.realized += realized;
    allTime += realized - fee12;
    if (closedTrip) {
      const closingFee = rest === 0 ? feeUnits : roundEven(feeUnits * BigInt(closedUnits), BigInt(units));
      const tripRealized = book.realized + realized;
      const tripFees = book.fees + closingFee * 10_000n;
      const net = tripRealized - tripFees;
      day.trips.push(net);
      trips.push({
        symbol: f.symbol,
        side: book.sign > 0 ? 'long' : 'short',
        openDay: book.openDay,
        closeDay: f.tradingDay,
        openHour: new Date(book.openedAt).getUTCHours(),
        holdSeconds: Math.floor((f.executedAt - book.openedAt) / 1000),
        realized: tripRealized,
        fees: tripFees,
        net,
        risk: book.risk,
        fills: book.fills,
        tags: [...book.tags].sort(),
      });
      if (rest === 0) book.sign = 0;
      else {
        openFresh(rest, (feeUnits - closingFee) * 10_000n);
        for (let u = 0; u < rest; u++) book.lots.push({ price, multiplier });
      }
    } else {
      if (startsFlat) openFresh(units, 0n);
      book.realized += realized;
      book.fees += fee12;
      if (closedUnits === 0) for (let u = 0; u < units; u++) book.lots.push({ price, multiplier });
    }
    if (index === last) {
      snapshot = [...books]
        .filter(([, b]) => b.lots.length > 0)
        .map(([symbol, b]) => ({ symbol, units: b.lots.length, sign: b.sign, priceSum: b.lots.reduce((s, l) => s + l.price, 0n), openedAt: b.openedAt }));
    }
  });
  return { days, trips, allTime, snapshot };
}

const sumOf = (xs: readonly bigint[]): bigint => xs.reduce((s, x) => s + x, 0n);
const ratio4 = (n: bigint, d: bigint): string | null => (d === 0n ? null : write(roundEven(n * TEN ** 4n, d), 4));

/** §14's totals (and §17's R figures) over days of trips: `days` oldest first, each with its net and its trips. */
function naiveTotals(days: readonly { realized: bigint; fees: bigint; trips: readonly bigint[] }[], trips: readonly NaiveTrip[]): JournalDto['totals'] {
  const nets = days.flatMap((d) => d.trips);
  const wins = nets.filter((x) => x > 0n);
  const losses = nets.filter((x) => x < 0n);
  const realized = sumOf(days.map((d) => d.realized));
  const fees = sumOf(days.map((d) => d.fees));
  let cumulative = 0n;
  let peak = 0n;
  let drawdown = 0n;
  for (const d of days) {
    cumulative += d.realized - d.fees;
    peak = cumulative > peak ? cumulative : peak;
    drawdown = peak - cumulative > drawdown ? peak - cumulative : drawdown;
  }
  const per = (amount: bigint, n: number): string | null => (n === 0 ? null : write(roundEven(amount, BigInt(n) * 10_000n), 8));
  const max = (xs: readonly bigint[]): bigint | null => (xs.length === 0 ? null : xs.reduce((m, x) => (x > m ? x : m)));
  const min = (xs: readonly bigint[]): bigint | null => (xs.length === 0 ? null : xs.reduce((m, x) => (x < m ? x : m)));
  const largestWin = max(wins);
  const largestLoss = min(losses);
  const risked = trips.filter((t) => t.risk !== null);
  const rOf = (t: NaiveTrip): bigint => roundEven(t.net * 10_000n, t.risk ?? 1n);
  return {
    realizedPnl: money12(realized),
    fees: money12(fees),
    netPnl: money12(realized - fees),
    roundTrips: nets.length,
    wins: wins.length,
    losses: losses.length,
    winRate: ratio4(BigInt(wins.length), BigInt(wins.length + losses.length)),
    profitFactor: ratio4(sumOf(wins), -sumOf(losses)),
    expectancy: per(sumOf(nets), nets.length),
    averageWin: per(sumOf(wins), wins.length),
    averageLoss: per(sumOf(losses), losses.length),
    largestWin: largestWin === null ? null : money12(largestWin),
    largestLoss: largestLoss === null ? null : money12(largestLoss),
    maxDrawdown: money12(drawdown),
    averageR: risked.length === 0 ? null : write(roundEven(sumOf(risked.map(rOf)), BigInt(risked.length)), 4),
    expectancyR: ratio4(sumOf(risked.map((t) => t.net)), sumOf(risked.map((t) => t.risk ?? 0n))),
  };
}

function naiveJournal(fills: readonly RandomFill[], from: string, to: string, startingBalance: string): JournalDto {
  const run = naiveRun(fills, to);
  const inRange = [...run.days].filter(([d]) => d >= from && d <= to).sort(([a], [b]) => (a < b ? -1 : 1));
  return {
    accountId: 'acct',
    currency: 'USD',
    from,
    to,
    totals: naiveTotals(
      inRange.map(([, d]) => d),
      run.trips.filter((t) => t.closeDay >= from && t.closeDay <= to),
    ),
    days: inRange.map(([tradingDay, d]) => ({
      tradingDay,
      realizedPnl: money12(d.realized),
      fees: money12(d.fees),
      netPnl: money12(d.realized - d.fees),
      fills: d.fills,
      roundTrips: d.trips.length,
      wins: d.trips.filter((x) => x > 0n).length,
      losses: d.trips.filter((x) => x < 0n).length,
    })),
    openPositions: run.snapshot
      .sort((a, b) => (a.symbol < b.symbol ? -1 : 1))
      .map((p) => ({
        symbol: p.symbol,
        quantity: write(BigInt(p.sign * p.units), 2),
        averagePrice: write(roundEven(p.priceSum, BigInt(p.units)), 8),
        openedAt: new Date(p.openedAt).toISOString(),
      })),
    balance: money12(fixed(startingBalance, 12) + run.allTime),
  };
}

const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
const HOLDS: readonly [number, string][] = [
  [60, '<1m'],
  [300, '1m-5m'],
  [1800, '5m-30m'],
  [7200, '30m-2h'],
  [86_400, '2h-1d'],
  [604_800, '1d-1w'],
];
/** The keys of a trip under a report dimension (a trip is in each of its tags' groups; untagged → null). */
function keysOf(t: NaiveTrip, by: string): (string | null)[] {
  switch (by) {
    case 'symbol':
      return [t.symbol];
    case 'side':
      return [t.side];
    case 'weekday':
      return [WEEKDAYS[new Date(`${t.openDay}T00:00:00Z`).getUTCDay()] ?? ''];
    case 'hour':
      return [String(t.openHour).padStart(2, '0')];
    case 'holdTime':
      return [HOLDS.find(([limit]) => t.holdSeconds < limit)?.[1] ?? '>=1w'];
    default:
      return t.tags.length === 0 ? [null] : [...t.tags];
  }
}

/** The trips' totals with each trip's realized P&L and fees on its closing day (the report's and the what-if's). */
function tripTotals(trips: readonly NaiveTrip[]): JournalDto['totals'] {
  const byDay = new Map<string, { realized: bigint; fees: bigint; trips: bigint[] }>();
  for (const t of trips) {
    const d = byDay.get(t.closeDay) ?? { realized: 0n, fees: 0n, trips: [] };
    byDay.set(t.closeDay, d);
    d.realized += t.realized;
    d.fees += t.fees;
    d.trips.push(t.net);
  }
  return naiveTotals(
    [...byDay].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, d]) => d),
    trips,
  );
}

const toSymbolFill = (f: RandomFill): SymbolFill => {
  const units = (t: string): bigint => parseUnits(t) ?? assert.fail(t);
  return {
    id: f.id,
    symbol: f.symbol,
    side: f.side,
    quantity: units(f.quantity),
    price: units(f.price),
    fee: units(f.fee),
    executedAt: f.executedAt,
    tradingDay: f.tradingDay,
    hour: new Date(f.executedAt).getUTCHours(),
    multiplier: units(f.multiplier),
    stopPrice: f.stopPrice === null ? null : units(f.stopPrice),
    assetClass: f.assetClass,
    tags: f.tags,
  };
};

function randomRange(random: () => number): { from: string; to: string } {
  const a = Math.floor(random() * 14) - 1;
  const b = a + Math.floor(random() * 14);
  return { from: dayOf(BASE + a * 86_400_000), to: dayOf(BASE + b * 86_400_000) };
}

describe('the journal of random fill sequences (DESIGN §14, §17)', () => {
  test('DESIGN 14, 17: 300 random sequences with multipliers ×1, ×50, ×0.5 and stops — the journal equals a naive unit-lot implementation, every figure (averageR, expectancyR too), every range', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const random = prng(seed);
      const fills = randomFills(random, 1 + Math.floor(random() * 60));
      for (let k = 0; k < 3; k++) {
        const { from, to } = k === 0 ? { from: '2026-01-01', to: '2026-02-01' } : randomRange(random);
        const account = { accountId: 'acct', currency: 'USD', from, to, startingBalance: '1000.5' };
        assert.deepEqual(computeJournal(fills.map(toSymbolFill), account), naiveJournal(fills, from, to, '1000.5'), `seed ${seed}, ${from}..${to}`);
      }
    }
  });

  test('DESIGN 14, 17: the cash identity — received − paid − fees = realized − fees − cost of open longs + proceeds of open shorts, at each lot’s multiplier, exactly', () => {
    for (let seed = 1000; seed < 1300; seed++) {
      const random = prng(seed);
      const fills = randomFills(random, 1 + Math.floor(random() * 80))
        .map(toSymbolFill)
        .sort((a, b) => a.executedAt - b.executedAt || (a.id < b.id ? -1 : 1));
      const books = new Map<string, Book>();
      let cash = 0n;
      let realized = 0n;
      let fees = 0n;
      for (const f of fills) {
        const book = books.get(f.symbol) ?? emptyBook();
        books.set(f.symbol, book);
        realized += applyFill(book, f).realized;
        // Amounts at 24 places: price (8) × quantity (8) × multiplier (8).
        cash += (f.side === 'sell' ? 1n : -1n) * f.price * f.quantity * f.multiplier;
        fees += f.fee * 10n ** 16n;
      }
      const open = [...books.values()].reduce(
        (s, b) => s + b.lots.slice(b.head).reduce((c, l) => c + (b.sign < 0 ? 1n : -1n) * l.quantity * l.price * l.multiplier, 0n),
        0n,
      );
      assert.equal(cash - fees, realized - fees + open, `seed ${seed}`);
      // The same through the journal's own figures: the balance moves by the all-time net P&L.
      const j = computeJournal(fills, { accountId: 'a', currency: 'USD', from: '2026-01-01', to: '2026-02-01', startingBalance: '0' });
      assert.equal(j.balance, j.totals.netPnl, `seed ${seed}`);
    }
  });
});

describe('rollups kept on write agree with the journal from every fill (DESIGN §14)', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ clock: new ManualClock(new Date('2026-03-01T00:00:00Z')) });
  });
  after(async () => t.close());

  test('DESIGN 14: fills created out of order (back-dated) and deleted through HTTP → the served journal equals computeJournal over the stored fills', async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const random = prng(seed * 7919);
      const user = `u-${randomUUID()}`;
      const res = await t.call('POST', '/api/accounts', { user, body: { name: 'Prop', currency: 'USD', timezone: 'Etc/UTC', startingBalance: '250.75' } });
      assert.equal(res.statusCode, 201, res.body);
      const accountId = res.json<{ id: string }>().id;
      const stored: TradeDto[] = [];
      for (const f of randomFills(random, 25)) {
        const created = await t.call('POST', `/api/accounts/${accountId}/trades`, {
          user,
          body: {
            symbol: f.symbol,
            side: f.side,
            quantity: f.quantity,
            price: f.price,
            fee: f.fee,
            executedAt: new Date(f.executedAt).toISOString(),
            // BBB and CCC are futures: CCC states its multiplier, BBB (like a root missing from the table) too.
            assetClass: f.assetClass,
            multiplier: f.multiplier,
            ...(f.stopPrice === null ? {} : { stopPrice: f.stopPrice }),
            tags: [...f.tags],
          },
        });
        assert.equal(created.statusCode, 201, created.body);
        stored.push(created.json<TradeDto>());
        if (random() < 0.2 && stored.length > 1) {
          const [gone] = stored.splice(Math.floor(random() * stored.length), 1);
          assert.equal((await t.call('DELETE', `/api/accounts/${accountId}/trades/${gone?.id ?? ''}`, { user })).statusCode, 204);
        }
        if (random() < 0.15 && stored.length > 0) {
          // A re-tag changes its round trip's tags (the symbol's trips are written anew).
          const i = Math.floor(random() * stored.length);
          const tags = TAGS.filter(() => random() < 0.4);
          const patched = await t.call('PATCH', `/api/accounts/${accountId}/trades/${stored[i]?.id ?? ''}`, { user, body: { tags } });
          assert.equal(patched.statusCode, 200, patched.body);
          stored[i] = patched.json<TradeDto>();
        }
      }
      const randomOf = (x: TradeDto): RandomFill => ({
        ...x,
        executedAt: Date.parse(x.executedAt),
        assetClass: x.assetClass === 'future' ? 'future' : 'stock',
        stopPrice: x.stopPrice,
        tags: x.tags,
      });
      const fills: SymbolFill[] = stored.map((x) => toSymbolFill(randomOf(x)));
      const trips = naiveRun(stored.map(randomOf), '9999-12-31').trips;
      for (let k = 0; k < 4; k++) {
        const { from, to } = k === 0 ? { from: '2026-01-01', to: '2026-02-01' } : randomRange(random);
        const served = await t.call('GET', `/api/accounts/${accountId}/journal?from=${from}&to=${to}`, { user });
        assert.equal(served.statusCode, 200, served.body);
        assert.deepEqual(
          served.json(),
          computeJournal(fills, { accountId, currency: 'USD', from, to, startingBalance: '250.75' }),
          `seed ${seed}, ${from}..${to}`,
        );
        const inRange = trips.filter((x) => x.closeDay >= from && x.closeDay <= to);
        // What-ifs: the journal and a report without some round trips equal the model over the trips that remain.
        const by = (['symbol', 'tag', 'side', 'weekday', 'hour', 'holdTime'] as const)[Math.floor(random() * 6)] ?? 'symbol';
        const candidates = [...new Set(inRange.flatMap((x) => keysOf(x, by)))].filter((key) => key !== null);
        const dropped = candidates.filter(() => random() < 0.5).map((key) => `${by}:${key}`);
        const anyValue = { symbol: 'ZZZ', tag: 'zzz', side: 'short', weekday: 'sun', hour: '03', holdTime: '>=1w' }[by];
        const exclude = dropped.length > 0 ? dropped : [`${by}:${candidates[0] ?? anyValue}`];
        const kept = inRange.filter((x) => !keysOf(x, by).some((key) => key !== null && exclude.includes(`${by}:${key}`)));
        const query = exclude.map((e) => `exclude=${encodeURIComponent(e)}`).join('&');
        const whatIf = await t.call('GET', `/api/accounts/${accountId}/journal?from=${from}&to=${to}&${query}`, { user });
        assert.equal(whatIf.statusCode, 200, whatIf.body);
        const w = whatIf.json<JournalDto>();
        assert.deepEqual(w.totals, tripTotals(kept), `what-if totals, seed ${seed}, ${from}..${to}, ${exclude.join(' ')}`);
        assert.deepEqual(w.excluded, {
          roundTrips: inRange.length - kept.length,
          netPnl: money12(sumOf(inRange.map((x) => x.net)) - sumOf(kept.map((x) => x.net))),
        });
        const reportBy = (['symbol', 'tag', 'side', 'weekday', 'hour', 'holdTime'] as const)[Math.floor(random() * 6)] ?? 'tag';
        const report = await t.call('GET', `/api/accounts/${accountId}/journal/report?from=${from}&to=${to}&by=${reportBy}&${query}`, { user });
        assert.equal(report.statusCode, 200, report.body);
        const r = report.json<{ totals: JournalDto['totals']; groups: { key: string | null; totals: JournalDto['totals'] }[] }>();
        assert.deepEqual(r.totals, tripTotals(kept), `report totals, seed ${seed}`);
        const keys = [...new Set(kept.flatMap((x) => keysOf(x, reportBy)))];
        assert.deepEqual(
          Object.fromEntries(r.groups.map((g) => [String(g.key), g.totals])),
          Object.fromEntries(keys.map((key) => [String(key), tripTotals(kept.filter((x) => keysOf(x, reportBy).includes(key)))])),
          `report by ${reportBy}, seed ${seed}`,
        );
        // One symbol: the journal and a report over its round trips alone equal the model over them.
        const symbols = [...new Set(inRange.flatMap((x) => keysOf(x, 'symbol')))].filter((key) => key !== null);
        const one = symbols[Math.floor(random() * symbols.length)] ?? 'ZZZ';
        const itsTrips = inRange.filter((x) => keysOf(x, 'symbol').includes(one));
        const scoped = await t.call('GET', `/api/accounts/${accountId}/journal?from=${from}&to=${to}&symbol=${encodeURIComponent(one.toLowerCase())}`, {
          user,
        });
        assert.equal(scoped.statusCode, 200, scoped.body);
        assert.deepEqual(scoped.json<JournalDto>().totals, tripTotals(itsTrips), `journal of ${one}, seed ${seed}`);
        assert.deepEqual(
          scoped.json<JournalDto>().openPositions,
          served.json<JournalDto>().openPositions.filter((p) => p.symbol === one),
          `${one}'s open position only, seed ${seed}`,
        );
        const scopedReport = await t.call(
          'GET',
          `/api/accounts/${accountId}/journal/report?from=${from}&to=${to}&by=${reportBy}&symbol=${encodeURIComponent(one)}`,
          {
            user,
          },
        );
        assert.equal(scopedReport.statusCode, 200, scopedReport.body);
        assert.deepEqual(scopedReport.json<{ totals: JournalDto['totals'] }>().totals, tripTotals(itsTrips), `report of ${one}, seed ${seed}`);
        // The round trips themselves, newest close first.
        const listed = await t.call('GET', `/api/accounts/${accountId}/round-trips?from=${from}&to=${to}&limit=200`, { user });
        assert.equal(listed.statusCode, 200, listed.body);
        const items = listed.json<{
          items: { symbol: string; side: string; netPnl: string; fees: string; rMultiple: string | null; fills: number; tags: string[] }[];
        }>().items;
        const summary = (x: { symbol: string; side: string; netPnl: string; fees: string; rMultiple: string | null; fills: number; tags: readonly string[] }) =>
          `${x.symbol} ${x.side} ${x.netPnl} ${x.fees} ${String(x.rMultiple)} ${x.fills} ${x.tags.join('|')}`;
        assert.deepEqual(
          items.map(summary).sort(),
          inRange
            .map((x) =>
              summary({
                ...x,
                netPnl: money12(x.net),
                fees: money12(x.fees),
                rMultiple: x.risk === null ? null : write(roundEven(x.net * 10_000n, x.risk), 4),
              }),
            )
            .sort(),
          `round trips, seed ${seed}`,
        );
      }
    }
  });
});
