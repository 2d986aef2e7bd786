// DESIGN §14 / issue 28: the journal of one year for accounts with 100,000 fills over two years, and the
// CSV import of 50,000 rows that seeds them. Baseline: the journal computed from every fill in one
// pass (the account's fills read straight from PostgreSQL, then computeJournal), i.e. without the
// rollups the service keeps on write.
import { performance } from 'node:perf_hooks';
import type { Harness } from '../lib/harness.ts';
import { HttpLoad } from '../lib/http-load.ts';
import { cpuMs } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { distribution, int, median, ms } from '../lib/stats.ts';
import { scaledFrom, UNIT_PLACES } from '../../src/features/journal/decimal.ts';
import { computeJournal, type SymbolFill } from '../../test/kits/journal.ts';
import type { JournalDto } from '../../src/features/journal/schemas.ts';

const CLIENTS = 10;
const ROWS_PER_FILE = 50_000;
const SYMBOLS = 20;
const DAY_MS = 86_400_000;
const JOURNAL_GOAL_MS = 100;
const IMPORT_GOAL_MS = 10_000;

/** One year of fills (50,000, every ~10.5 minutes), ending at `end`: buys and sells over 20 symbols, longs and shorts. */
function yearOfFills(end: number, year: number, seed: number): string {
  let state = seed;
  const random = (): number => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
  const step = (365 * DAY_MS) / ROWS_PER_FILE;
  const start = end - (2 - year) * 365 * DAY_MS;
  const lines = ['symbol,side,quantity,price,fee,executedAt,externalId'];
  for (let i = 0; i < ROWS_PER_FILE; i++) {
    const s = Math.floor(random() * SYMBOLS);
    const side = random() < 0.5 ? 'buy' : 'sell';
    const qty = 1 + Math.floor(random() * 20);
    const price = (50 + s * 10 + random() * 5).toFixed(2);
    lines.push(`SYM${s},${side},${qty},${price},0.35,${new Date(start + i * step).toISOString()},y${year}-${i}`);
  }
  return `${lines.join('\n')}\n`;
}

export async function journal(h: Harness): Promise<Row> {
  const accounts = h.quick ? 1 : 3;
  const durationMs = h.quick ? 3000 : 10_000;
  const service = await h.startService('service-journal');
  const load = new HttpLoad(service.ready, CLIENTS);
  try {
    const end = Date.now() - 60_000;
    const ids: string[] = [];
    const tokens: string[] = [];
    const importMs: number[] = [];
    for (let a = 0; a < accounts; a++) {
      const token = await h.token(`journal-${a}`);
      const created = await fetch(`${service.ready}/api/accounts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Bench', currency: 'USD', timezone: 'America/New_York', startingBalance: '100000' }),
      });
      if (created.status !== 201) throw new Error(`account: ${created.status} ${await created.text()}`);
      const id = ((await created.json()) as { id: string }).id;
      // Two files, a year each, oldest first: the second lands after the 50,000 fills of the first.
      for (const year of [0, 1]) {
        const csv = yearOfFills(end, year, 7 + a * 2 + year);
        const t0 = performance.now();
        const res = await fetch(`${service.ready}/api/accounts/${id}/trades/import`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv' },
          body: csv,
        });
        const body = await res.text();
        importMs.push(performance.now() - t0);
        if (res.status !== 200 || !body.includes(`"imported":${ROWS_PER_FILE}`)) throw new Error(`import: ${res.status} ${body.slice(0, 300)}`);
      }
      ids.push(id);
      tokens.push(token);
    }
    await h.stores.pool.query('vacuum analyze trades');
    await h.stores.pool.query('vacuum analyze trade_days');

    const to = new Date(end).toISOString().slice(0, 10);
    const from = new Date(end - 364 * DAY_MS).toISOString().slice(0, 10);
    const path = (i: number): string => `/api/accounts/${ids[i] ?? ''}/journal?from=${from}&to=${to}`;
    const auth = (i: number): Record<string, string> => ({ authorization: `Bearer ${tokens[i] ?? ''}` });
    let bad = '';
    const samples: number[] = [];
    const iteration = async (record: boolean): Promise<void> => {
      const i = Math.floor(Math.random() * ids.length);
      const r = await load.get(path(i), auth(i), !record);
      if (r.status !== 200) bad ||= `${r.status} ${r.body.slice(0, 200)}`;
      else if (!record) {
        const j = JSON.parse(r.body) as JournalDto;
        if (j.days.length < 300 || j.totals.roundTrips === 0) bad ||= `a year showed ${j.days.length} days, ${j.totals.roundTrips} round trips`;
      }
      if (record) samples.push(r.ms);
    };
    await load.run(1, 1500, () => iteration(false));
    await load.run(1, h.quick ? 2000 : 5000, () => iteration(true));
    const alone = distribution(samples.splice(0));
    const cpu0 = cpuMs(service.pid);
    const { wallMs } = await load.run(CLIENTS, durationMs, () => iteration(true));
    const cpu = cpuMs(service.pid) - cpu0;
    if (bad) throw new Error(bad);
    const ceiling = distribution(samples);
    const rps = (ceiling.n * 1000) / wallMs;

    // Baseline: every fill read and replayed per request, a few times (each is slow).
    const baseline: number[] = [];
    let agree = true;
    const served = JSON.parse((await load.get(path(0), auth(0), true)).body) as JournalDto;
    for (let k = 0; k < (h.quick ? 2 : 5); k++) {
      const t0 = performance.now();
      const { rows } = await h.stores.pool.query<{
        id: string;
        symbol: string;
        side: 'buy' | 'sell';
        quantity: string;
        price: string;
        fee: string;
        executed_at: Date;
        trading_day: string;
      }>(
        `select id, symbol, side, quantity::text, price::text, fee::text, executed_at, trading_day::text from trades where account_id = $1 order by executed_at, id`,
        [ids[0]],
      );
      const fills: SymbolFill[] = rows.map((r) => ({
        id: r.id,
        symbol: r.symbol,
        side: r.side,
        quantity: scaledFrom(r.quantity, UNIT_PLACES),
        price: scaledFrom(r.price, UNIT_PLACES),
        fee: scaledFrom(r.fee, UNIT_PLACES),
        executedAt: r.executed_at.getTime(),
        tradingDay: r.trading_day,
        hour: 0,
        multiplier: 100_000_000n,
        stopPrice: null,
        assetClass: 'stock',
        tags: [],
      }));
      const computed = computeJournal(fills, { accountId: served.accountId, currency: served.currency, from, to, startingBalance: '100000' });
      baseline.push(performance.now() - t0);
      agree &&= JSON.stringify(computed) === JSON.stringify(served);
    }
    if (!agree) throw new Error('the journal computed from every fill differs from the one the service served from its rollups');
    const slowestImport = Math.max(...importMs);
    return {
      id: 'journal',
      title: 'Trading journal',
      service: `journal of a year p50 ${ms(alone.p50)} ms, p99 ${ms(alone.p99)} ms a request at a time · ${int(rps)} req/s at ${CLIENTS} clients (p99 ${ms(ceiling.p99)} ms) · ${((cpu * 1000) / ceiling.n).toFixed(0)} µs CPU/req; import of 50,000 rows median ${(median(importMs) / 1000).toFixed(2)} s, slowest ${(slowestImport / 1000).toFixed(2)} s`,
      baseline: `every fill read and replayed per request: median ${ms(median(baseline))} ms (pg + computeJournal, same answer)`,
      result: `journal p99 ${ms(alone.p99)} ms alone (${(median(baseline) / alone.p50).toFixed(0)}× faster than replaying every fill); import ${(slowestImport / 1000).toFixed(2)} s at worst`,
      goal: `journal p99 ≤ ${JOURNAL_GOAL_MS} ms a request at a time with 100,000 fills; import of 50,000 rows ≤ ${IMPORT_GOAL_MS / 1000} s`,
      met: alone.p99 <= JOURNAL_GOAL_MS && slowestImport <= IMPORT_GOAL_MS,
      how:
        `${accounts} account(s) (America/New_York), each seeded through the service's own import route with two CSV files of ${int(ROWS_PER_FILE)} rows ` +
        `(a year each, oldest first; ${SYMBOLS} symbols, random buys and sells of 1–20 shares, so positions go long, short and flip; every row with an ` +
        `externalId): each import is timed at the client, body sent to report received (${importMs.length} imports; the second of each account lands after ` +
        `the first's 50,000 fills). Then GET …/journal for the last 365 trading days of a random account: one client in a loop for ${h.quick ? 2 : 5} s ` +
        `after a 1.5 s warm-up ("a request at a time", the goal's judge), then ${CLIENTS} clients in a closed loop for ${durationMs / 1000} s (the ceiling). ` +
        "Baseline: the same journal computed from scratch — the account's 100,000 fills read with one pg query and replayed by computeJournal (the " +
        'pure module the property test checks) — which must equal the served journal exactly.',
      notes: [
        `journal closed loop p50 ${ms(ceiling.p50)} ms, p99 ${ms(ceiling.p99)} ms, max ${ms(ceiling.max)} ms; imports ${importMs.map((x) => (x / 1000).toFixed(2)).join(', ')} s`,
      ],
    };
  } finally {
    await load.close();
    await service.stop();
  }
}
