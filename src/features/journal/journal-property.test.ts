// DESIGN §14, the journal of random fill sequences (a seeded generator, so a failure replays):
// 1. against a deliberately naive implementation written here — quantities expanded into unit lots of
//    0.01, amounts as BigInt counts of 10^-10, its own rounding — never sharing code with the service;
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
import { computeJournal, type SymbolFill } from './journal.ts';
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
}

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
    out.push({
      id: `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`,
      symbol: pick(['AAA', 'BBB', 'CCC']),
      side: random() < 0.5 ? 'buy' : 'sell',
      quantity: cents(0.01, 6),
      price: cents(1, 50),
      fee: random() < 0.3 ? `0.0000000${Math.floor(random() * 10)}` : cents(0, 2),
      executedAt,
      tradingDay: dayOf(executedAt),
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
/** Amount in 10^-10 → money string (half to even at 8 places). */
const money10 = (v: bigint): string => write(roundEven(v, 100n), 8);

interface UnitLot {
  readonly price: bigint;
}

function naiveJournal(fills: readonly RandomFill[], from: string, to: string, startingBalance: string): JournalDto {
  const ordered = [...fills].sort((a, b) => a.executedAt - b.executedAt || (a.id < b.id ? -1 : 1));
  let last = -1;
  ordered.forEach((f, i) => {
    if (f.tradingDay <= to) last = i;
  });
  const books = new Map<string, { sign: number; lots: UnitLot[]; tripRealized: bigint; tripFees: bigint; openedAt: number }>();
  type Day = { realized: bigint; fees: bigint; fills: number; trips: bigint[] };
  const days = new Map<string, Day>();
  let allTime = 0n;
  let snapshot: { symbol: string; units: number; sign: number; priceSum: bigint; openedAt: number }[] = [];
  ordered.forEach((f, index) => {
    const book = books.get(f.symbol) ?? { sign: 0, lots: [], tripRealized: 0n, tripFees: 0n, openedAt: 0 };
    books.set(f.symbol, book);
    const dir = f.side === 'buy' ? 1 : -1;
    const units = Number(fixed(f.quantity, 2));
    const price = fixed(f.price, 8);
    const fee10 = fixed(f.fee, 8) * 100n;
    const day = days.get(f.tradingDay) ?? { realized: 0n, fees: 0n, fills: 0, trips: [] };
    days.set(f.tradingDay, day);
    day.fills++;
    day.fees += fee10;
    const feeUnits = fixed(f.fee, 8);
    let realized = 0n;
    let closedUnits = 0;
    let closedTrip = false;
    for (let u = 0; u < units; u++) {
      if (book.sign === -dir && book.lots.length > 0) {
        const lot = book.lots.shift() as UnitLot;
        // One unit is 0.01: (sell − buy) in 10^-8 × 0.01 = 10^-10.
        realized += dir === -1 ? price - lot.price : lot.price - price;
        closedUnits++;
        if (book.lots.length === 0) closedTrip = true;
      } else {
        if (book.lots.length === 0) {
          book.sign = dir;
          book.openedAt = f.executedAt;
        }
        book.lots.push({ price });
      }
    }
    day.realized += realized;
    allTime += realized;
    if (closedTrip) {
      const rest = units - closedUnits;
      const closingFee = rest === 0 ? feeUnits : roundEven(feeUnits * BigInt(closedUnits), BigInt(units));
      day.trips.push(book.tripRealized + realized - book.tripFees - closingFee * 100n);
      book.tripRealized = 0n;
      book.tripFees = rest === 0 ? 0n : (feeUnits - closingFee) * 100n;
      if (rest === 0) book.sign = 0;
    } else {
      book.tripRealized += realized;
      book.tripFees += fee10;
    }
    allTime -= fee10;
    if (index === last) {
      snapshot = [...books]
        .filter(([, b]) => b.lots.length > 0)
        .map(([symbol, b]) => ({ symbol, units: b.lots.length, sign: b.sign, priceSum: b.lots.reduce((s, l) => s + l.price, 0n), openedAt: b.openedAt }));
    }
  });
  const inRange = [...days].filter(([d]) => d >= from && d <= to).sort(([a], [b]) => (a < b ? -1 : 1));
  const trips = inRange.flatMap(([, d]) => d.trips);
  const wins = trips.filter((x) => x > 0n);
  const losses = trips.filter((x) => x < 0n);
  const sum = (xs: readonly bigint[]): bigint => xs.reduce((s, x) => s + x, 0n);
  const realized = sum(inRange.map(([, d]) => d.realized));
  const fees = sum(inRange.map(([, d]) => d.fees));
  let cumulative = 0n;
  let peak = 0n;
  let drawdown = 0n;
  for (const [, d] of inRange) {
    cumulative += d.realized - d.fees;
    peak = cumulative > peak ? cumulative : peak;
    drawdown = peak - cumulative > drawdown ? peak - cumulative : drawdown;
  }
  const per = (amount: bigint, n: number): string | null => (n === 0 ? null : write(roundEven(amount, BigInt(n) * 100n), 8));
  const ratio4 = (n: bigint, d: bigint): string | null => (d === 0n ? null : write(roundEven(n * TEN ** 4n, d), 4));
  const max = (xs: readonly bigint[]): bigint | null => (xs.length === 0 ? null : xs.reduce((m, x) => (x > m ? x : m)));
  const min = (xs: readonly bigint[]): bigint | null => (xs.length === 0 ? null : xs.reduce((m, x) => (x < m ? x : m)));
  const largestWin = max(wins);
  const largestLoss = min(losses);
  return {
    accountId: 'acct',
    currency: 'USD',
    from,
    to,
    totals: {
      realizedPnl: money10(realized),
      fees: money10(fees),
      netPnl: money10(realized - fees),
      roundTrips: trips.length,
      wins: wins.length,
      losses: losses.length,
      winRate: ratio4(BigInt(wins.length), BigInt(wins.length + losses.length)),
      profitFactor: ratio4(sum(wins), -sum(losses)),
      expectancy: per(sum(trips), trips.length),
      averageWin: per(sum(wins), wins.length),
      averageLoss: per(sum(losses), losses.length),
      largestWin: largestWin === null ? null : money10(largestWin),
      largestLoss: largestLoss === null ? null : money10(largestLoss),
      maxDrawdown: money10(drawdown),
    },
    days: inRange.map(([tradingDay, d]) => ({
      tradingDay,
      realizedPnl: money10(d.realized),
      fees: money10(d.fees),
      netPnl: money10(d.realized - d.fees),
      fills: d.fills,
      roundTrips: d.trips.length,
      wins: d.trips.filter((x) => x > 0n).length,
      losses: d.trips.filter((x) => x < 0n).length,
    })),
    openPositions: snapshot
      .sort((a, b) => (a.symbol < b.symbol ? -1 : 1))
      .map((p) => ({
        symbol: p.symbol,
        quantity: write(BigInt(p.sign * p.units), 2),
        averagePrice: write(roundEven(p.priceSum, BigInt(p.units)), 8),
        openedAt: new Date(p.openedAt).toISOString(),
      })),
    balance: money10(fixed(startingBalance, 10) + allTime),
  };
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
  };
};

function randomRange(random: () => number): { from: string; to: string } {
  const a = Math.floor(random() * 14) - 1;
  const b = a + Math.floor(random() * 14);
  return { from: dayOf(BASE + a * 86_400_000), to: dayOf(BASE + b * 86_400_000) };
}

describe('the journal of random fill sequences (DESIGN §14)', () => {
  test('DESIGN 14: 300 random sequences — the journal equals a naive unit-lot implementation, every figure, every range', () => {
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

  test('DESIGN 14: the cash identity — received − paid − fees = realized − fees − cost of open longs + proceeds of open shorts, exactly', () => {
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
        cash += (f.side === 'sell' ? 1n : -1n) * f.price * f.quantity;
        fees += f.fee * 10n ** 8n;
      }
      const open = [...books.values()].reduce((s, b) => s + (b.sign < 0 ? b.cost : -b.cost), 0n);
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
          body: { symbol: f.symbol, side: f.side, quantity: f.quantity, price: f.price, fee: f.fee, executedAt: new Date(f.executedAt).toISOString() },
        });
        assert.equal(created.statusCode, 201, created.body);
        stored.push(created.json<TradeDto>());
        if (random() < 0.2 && stored.length > 1) {
          const [gone] = stored.splice(Math.floor(random() * stored.length), 1);
          assert.equal((await t.call('DELETE', `/api/accounts/${accountId}/trades/${gone?.id ?? ''}`, { user })).statusCode, 204);
        }
      }
      const fills: SymbolFill[] = stored.map((x) => toSymbolFill({ ...x, executedAt: Date.parse(x.executedAt) }));
      for (let k = 0; k < 4; k++) {
        const { from, to } = k === 0 ? { from: '2026-01-01', to: '2026-02-01' } : randomRange(random);
        const served = await t.call('GET', `/api/accounts/${accountId}/journal?from=${from}&to=${to}`, { user });
        assert.equal(served.statusCode, 200, served.body);
        assert.deepEqual(
          served.json(),
          computeJournal(fills, { accountId, currency: 'USD', from, to, startingBalance: '250.75' }),
          `seed ${seed}, ${from}..${to}`,
        );
      }
    }
  });
});
