// DESIGN §17 speed: an account of 100,000 fills over two years, on the embedded store (PGlite, the
// default without DATABASE_URL) and on PostgreSQL: every trades page and every round-trips page walked
// newest first by the service's own cursor, a report by weekday and a what-if without Fridays, and a
// back-dated import of 50,000 rows landing among the stored fills (every later outcome rewritten).
import { performance } from 'node:perf_hooks';
import type { Harness } from '../lib/harness.ts';
import { HttpLoad } from '../lib/http-load.ts';
import type { Row } from '../lib/report.ts';
import { distribution, ms, type Distribution } from '../lib/stats.ts';

const ROWS_PER_FILE = 50_000;
const SYMBOLS = 20;
const DAY_MS = 86_400_000;
const PAGE_GOAL_MS = 20;
const REPORT_GOAL_MS = 100;
const IMPORT_GOAL_MS = 10_000;

/**
 * 50,000 fills spread evenly over `years` years ending at `end`, shifted by `offset` of a step: buys and
 * sells over 20 symbols; a third of the fills on a symbol with a position close it, so the account has
 * round trips of every length as well as positions that grow, shrink and flip.
 */
function fills(end: number, years: number, offset: number, seed: number, idPrefix: string): string {
  let state = seed;
  const random = (): number => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
  const step = (years * 365 * DAY_MS) / ROWS_PER_FILE;
  const start = end - years * 365 * DAY_MS;
  const positions = new Array<number>(SYMBOLS).fill(0);
  const lines = ['symbol,side,quantity,price,fee,executedAt,externalId'];
  for (let i = 0; i < ROWS_PER_FILE; i++) {
    const s = Math.floor(random() * SYMBOLS);
    const held = positions[s] ?? 0;
    const close = held !== 0 && random() < 0.33;
    const side = close ? (held > 0 ? 'sell' : 'buy') : random() < 0.5 ? 'buy' : 'sell';
    const qty = close ? Math.abs(held) : 1 + Math.floor(random() * 20);
    positions[s] = held + (side === 'buy' ? qty : -qty);
    const price = (50 + s * 10 + random() * 5).toFixed(2);
    lines.push(`SYM${s},${side},${qty},${price},0.35,${new Date(start + (i + offset) * step).toISOString()},${idPrefix}-${i}`);
  }
  return `${lines.join('\n')}\n`;
}

interface StoreFigures {
  readonly store: string;
  readonly seedMs: number[];
  readonly backdatedMs: number;
  readonly trades: Distribution;
  readonly tradesWalkMs: number;
  readonly tradeWalks: string[];
  readonly trips: Distribution;
  readonly tripCount: number;
  readonly tripWalks: string[];
  readonly report: Distribution;
  readonly whatIf: Distribution;
  /** PostgreSQL's pages before its statistics of the seed. */
  readonly cold: string | undefined;
}

async function measure(h: Harness, store: 'embedded' | 'PostgreSQL', index: number): Promise<StoreFigures> {
  // Without DATABASE_URL the service opens PGlite in its DATA_DIR, as a newcomer's `npm start` does.
  const service = await h.startService(`service-journal-speed-${index}`, store === 'embedded' ? { DATABASE_URL: '' } : {});
  const load = new HttpLoad(service.ready, 1);
  try {
    const token = await h.token(`journal-speed-${index}`);
    const auth = { authorization: `Bearer ${token}` };
    const created = await fetch(`${service.ready}/api/accounts`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bench', currency: 'USD', timezone: 'America/New_York', startingBalance: '100000' }),
    });
    if (created.status !== 201) throw new Error(`account: ${created.status} ${await created.text()}`);
    const id = ((await created.json()) as { id: string }).id;
    const end = Date.now() - 60_000;
    const importCsv = async (csv: string): Promise<number> => {
      const t0 = performance.now();
      const res = await fetch(`${service.ready}/api/accounts/${id}/trades/import`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'text/csv' },
        body: csv,
      });
      const body = await res.text();
      const took = performance.now() - t0;
      if (res.status !== 200 || !body.includes(`"imported":${ROWS_PER_FILE}`)) throw new Error(`import: ${res.status} ${body.slice(0, 300)}`);
      return took;
    };
    // Two years of fills, a year a file, oldest first.
    const seedMs = [await importCsv(fills(end - 365 * DAY_MS, 1, 0, 11, 'a')), await importCsv(fills(end, 1, 0, 13, 'b'))];

    const walk = async (route: 'trades' | 'round-trips', query: string, samples: number[]): Promise<{ pages: number; items: number; ms: number }> => {
      let cursor: string | null = null;
      let pages = 0;
      let items = 0;
      const t0 = performance.now();
      do {
        const q = new URLSearchParams(query);
        if (cursor !== null) q.set('cursor', cursor);
        const r = await load.get(`/api/accounts/${id}/${route}?${q}`, auth, true);
        if (r.status !== 200) throw new Error(`${route}?${query}: ${r.status} ${r.body.slice(0, 200)}`);
        samples.push(r.ms);
        const page = JSON.parse(r.body) as { items: unknown[]; nextCursor: string | null };
        pages++;
        items += page.items.length;
        cursor = page.nextCursor;
      } while (cursor !== null);
      return { pages, items, ms: performance.now() - t0 };
    };
    const day = (msAgo: number): string => new Date(end - msAgo).toISOString().slice(0, 10);
    const quarter = `from=${day(300 * DAY_MS)}&to=${day(210 * DAY_MS)}`;
    // PostgreSQL right after the seed: the planner has the statistics each import committed with its rows
    // (an import that grows the fills past autovacuum's rule analyzes them in its transaction), but nothing
    // has vacuumed the new rows yet (within autovacuum_naptime, a minute). One walk of each kind then,
    // reported apart; then the tables as in use (vacuumed and analyzed, as autovacuum leaves them), for
    // the figures. The embedded store has no autovacuum; the service analyzes what its writes changed.
    let cold: string | undefined;
    if (store === 'PostgreSQL') {
      const coldTrades: number[] = [];
      const coldTrips: number[] = [];
      await walk('trades', 'limit=200', coldTrades);
      await walk('round-trips', 'limit=200', coldTrips);
      const [t, r] = [distribution(coldTrades), distribution(coldTrips)];
      cold =
        `right after the seed, before autovacuum (the imports' own statistics, nothing vacuumed): trades pages p50 ${ms(t.p50)} / p99 ${ms(t.p99)} / max ${ms(t.max)} ms, ` +
        `round-trips pages p50 ${ms(r.p50)} / p99 ${ms(r.p99)} / max ${ms(r.max)} ms`;
      await h.stores.pool.query('vacuum (analyze) trades, trade_round_trips, trade_days');
    }
    // Warm-up: the first pages of each kind, not counted.
    await walk('trades', `limit=200&to=${day(700 * DAY_MS)}`, []);
    await walk('round-trips', `limit=200&to=${day(600 * DAY_MS)}`, []);
    const tradeSamples: number[] = [];
    const whole = await walk('trades', 'limit=200', tradeSamples);
    if (whole.items !== 2 * ROWS_PER_FILE) throw new Error(`the walk read ${whole.items} trades`);
    const tradeWalks = [`limit 200: ${whole.pages} pages in ${(whole.ms / 1000).toFixed(1)} s`];
    for (const [label, query] of [
      ['default limit (50)', ''],
      ['one symbol', 'symbol=SYM7&limit=200'],
      ['a quarter a year back', `${quarter}&limit=200`],
      ['one symbol in that quarter', `${quarter}&symbol=SYM7`],
    ] as const) {
      const samples: number[] = [];
      const w = await walk('trades', query, samples);
      tradeSamples.push(...samples);
      const d = distribution(samples);
      tradeWalks.push(`${label}: ${w.pages} pages, p50 ${ms(d.p50)} / p99 ${ms(d.p99)} ms`);
    }
    const tripSamples: number[] = [];
    const trips = await walk('round-trips', 'limit=200', tripSamples);
    const tripWalks = [`limit 200: ${trips.pages} pages in ${(trips.ms / 1000).toFixed(1)} s`];
    for (const [label, query] of [
      ['default limit (50)', ''],
      ['one symbol', 'symbol=SYM7&limit=200'],
      ['a quarter a year back', `${quarter}&limit=200`],
    ] as const) {
      const samples: number[] = [];
      const w = await walk('round-trips', query, samples);
      tripSamples.push(...samples);
      const d = distribution(samples);
      tripWalks.push(`${label}: ${w.pages} pages, p50 ${ms(d.p50)} / p99 ${ms(d.p99)} ms`);
    }

    const range = `from=${day(730 * DAY_MS)}&to=${day(0)}`;
    const timed = async (path: string, n: number): Promise<Distribution> => {
      const samples: number[] = [];
      for (let i = 0; i < n + 5; i++) {
        const r = await load.get(path, auth);
        if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.body.slice(0, 200)}`);
        if (i >= 5) samples.push(r.ms);
      }
      return distribution(samples);
    };
    const report = await timed(`/api/accounts/${id}/journal/report?${range}&by=weekday`, h.quick ? 30 : 100);
    const whatIf = await timed(`/api/accounts/${id}/journal?${range}&exclude=weekday:fri`, h.quick ? 30 : 100);

    // Back-dated: 50,000 fills over the same two years, each between two stored ones.
    const backdatedMs = await importCsv(fills(end, 2, 0.5, 17, 'c'));
    return {
      store,
      seedMs,
      backdatedMs,
      trades: distribution(tradeSamples),
      tradesWalkMs: whole.ms,
      tradeWalks,
      trips: distribution(tripSamples),
      tripCount: trips.items,
      tripWalks,
      report,
      whatIf,
      cold,
    };
  } finally {
    await load.close();
    await service.stop();
  }
}

export async function journalSpeed(h: Harness): Promise<Row> {
  const figures = [await measure(h, 'embedded', 0), await measure(h, 'PostgreSQL', 1)];
  const pagesMet = (f: StoreFigures): boolean => f.trades.p99 <= PAGE_GOAL_MS && f.trips.p99 <= PAGE_GOAL_MS;
  const reportsMet = (f: StoreFigures): boolean => f.report.p99 <= REPORT_GOAL_MS && f.whatIf.p99 <= REPORT_GOAL_MS;
  const side = (f: StoreFigures): string =>
    `${f.store}: trades page p50 ${ms(f.trades.p50)} / p99 ${ms(f.trades.p99)} ms (${f.trades.n} pages), round-trips page p50 ${ms(f.trips.p50)} / ` +
    `p99 ${ms(f.trips.p99)} ms (${f.trips.n} pages); report by weekday p99 ${ms(f.report.p99)} ms, what-if without Fridays p99 ${ms(f.whatIf.p99)} ms; ` +
    `back-dated import of 50,000 rows ${(f.backdatedMs / 1000).toFixed(2)} s`;
  const verdict = (f: StoreFigures): string =>
    `${f.store}: pages ${pagesMet(f) ? 'met' : 'missed'} (p99 ${ms(Math.max(f.trades.p99, f.trips.p99))} ms), reports ${reportsMet(f) ? 'met' : 'missed'} ` +
    `(p99 ${ms(Math.max(f.report.p99, f.whatIf.p99))} ms), import ${f.backdatedMs <= IMPORT_GOAL_MS ? 'met' : 'missed'} (${(f.backdatedMs / 1000).toFixed(2)} s)`;
  return {
    id: 'journal-speed',
    title: 'Journal pages, reports and back-dated imports',
    service: figures.map(side).join('; '),
    baseline: `the same account's seed imports, 50,000 rows each landing after the stored fills: ${figures
      .map((f) => `${f.store} ${f.seedMs.map((x) => (x / 1000).toFixed(2)).join(', ')} s`)
      .join('; ')}`,
    result: figures.map(verdict).join('; '),
    goal: `any trades or round-trips page p99 ≤ ${PAGE_GOAL_MS} ms, a report or what-if p99 ≤ ${REPORT_GOAL_MS} ms, a back-dated import of 50,000 rows ≤ ${IMPORT_GOAL_MS / 1000} s, each on both stores`,
    met: figures.every((f) => pagesMet(f) && reportsMet(f) && f.backdatedMs <= IMPORT_GOAL_MS),
    how:
      'One account (America/New_York) on each store — the embedded PGlite a service without DATABASE_URL opens in its DATA_DIR, then PostgreSQL — seeded ' +
      `through the import route with two files of ${ROWS_PER_FILE.toLocaleString('en-US')} rows (a year each, oldest first; ${SYMBOLS} symbols, buys and ` +
      'sells of 1–20 shares, a third of the fills on a symbol with a position closing it, every row with an externalId). On PostgreSQL one walk of ' +
      'each kind right after the seed (before autovacuum has vacuumed the new rows: the planner has the statistics the imports committed; in the details), then the tables vacuumed and analyzed, as ' +
      'autovacuum leaves them, for the figures; the embedded store has no autovacuum and the service analyzes what its writes changed. ' +
      'One client, a request at a time, ' +
      'times each request at the client (sent to body read): every trades page of the account newest first (limit 200, by the nextCursor each page ' +
      'returns), then the walks with the default limit, one symbol, a quarter a year back (from/to) and that symbol in it; every round-trips page the same ' +
      'way (limit 200, default, one symbol, the quarter); after 5 unmeasured requests each, 100 reports by weekday and 100 journals without Fridays ' +
      '(exclude=weekday:fri) over the two years. Last, a back-dated import: 50,000 rows over the same two years, each half-way between two stored ' +
      'fills, so every symbol is replayed and the outcome of nearly every stored fill rewritten; timed body sent to report received. The baseline column ' +
      'gives the seed imports (fills that land after the stored ones, which replay nothing).',
    notes: figures.flatMap((f) => [
      ...(f.cold === undefined ? [] : [`Journal pages, ${f.store}: ${f.cold}`]),
      `Journal pages, ${f.store}: trades walks — ${f.tradeWalks.join('; ')}; max ${ms(f.trades.max)} ms`,
      `Journal pages, ${f.store}: ${f.tripCount.toLocaleString('en-US')} round trips; walks — ${f.tripWalks.join('; ')}; max ${ms(f.trips.max)} ms; ` +
        `report p50 ${ms(f.report.p50)} ms, what-if p50 ${ms(f.whatIf.p50)} ms`,
    ]),
  };
}
