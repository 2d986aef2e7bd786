// DESIGN §13: GET /api/advisor/usage over a year for users with 100,000 turns each; baseline: the
// service's own summary statement sent straight to PostgreSQL.
import { performance } from 'node:perf_hooks';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from '../../src/db/types.ts';
import { mintToken } from '../../src/http/auth.ts';
import { summary, type GroupBy } from '../../src/features/usage/repo.ts';
import { TEST_JWT_SECRET } from '../../test/helpers/app.ts';
import type { Harness } from '../lib/harness.ts';
import { HttpLoad } from '../lib/http-load.ts';
import { cpuMs } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { closedLoops, distribution, int, ms } from '../lib/stats.ts';

const CLIENTS = 10;
const TURNS_PER_USER = 100_000;
/** Two years of history, four models: the rows 100,000 turns leave in `usage_daily`. */
const DAYS = 730;
const MODELS = [
  ['openai', 'gpt-4o-mini', 0],
  ['anthropic', 'claude-sonnet-4-5', 6],
  ['google', 'gemini-2.5-flash', 0],
  ['openrouter', 'openai/gpt-4.1', 5],
] as const;
const GOAL_MS = 20;
/** The paced run's rate, as a share of the rate the closed loop reached. */
const PACED_SHARE = 0.5;

const dateOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

export async function usage(h: Harness): Promise<Row> {
  const users = h.quick ? 5 : 50;
  const durationMs = h.quick ? 3000 : 10_000;
  const service = await h.startService('service-usage');
  const load = new HttpLoad(service.ready, CLIENTS);
  try {
    // The service has migrated the database by now. Each user's 100,000 turns, as the rows their ends
    // add up to (one per UTC day, provider and model), every figure as the turn statement writes it.
    const t0 = performance.now();
    const slots = DAYS * MODELS.length;
    const base = Math.floor(TURNS_PER_USER / slots);
    const extra = TURNS_PER_USER - base * slots;
    await h.stores.pool.query(`insert into users (id) select 'usage-' || u from generate_series(0, $1 - 1) u on conflict (id) do nothing`, [users]);
    await h.stores.pool.query(
      `insert into usage_daily (user_id, day, provider, model, turns, input_tokens, output_tokens, cached_input_tokens,
         reasoning_tokens, cost_micros, priced_turns, credits, allowance_turns)
       select 'usage-' || u, current_date - d, m.provider, m.model, n, n * 1200, n * 300, n * 200, n * 50, n * 345, n,
         n * m.credits, case when m.credits = 0 then n else 0 end
       from generate_series(0, $1 - 1) u, generate_series(0, $2 - 1) d,
         unnest($3::int[], $4::text[], $5::text[], $6::int[]) as m(i, provider, model, credits),
         lateral (select $7::int + case when d * $8 + m.i < $9 then 1 else 0 end as n) t
       -- Written as turns end, day after day (users interleaved), so a user's rows are spread over the table.
       order by d desc, u`,
      [users, DAYS, MODELS.map((_, i) => i), MODELS.map((m) => m[0]), MODELS.map((m) => m[1]), MODELS.map((m) => m[2]), base, MODELS.length, extra],
    );
    await h.stores.pool.query('vacuum analyze usage_daily');
    const seedMs = performance.now() - t0;
    const check = await h.stores.pool.query<{ n: string }>(`select sum(turns)::text as n from usage_daily where user_id = 'usage-0'`);
    if (Number(check.rows[0]?.n) !== TURNS_PER_USER) throw new Error(`seeded ${check.rows[0]?.n} turns, not ${TURNS_PER_USER}`);

    const tokens = await Promise.all(Array.from({ length: users }, (_, i) => mintToken(TEST_JWT_SECRET, `usage-${i}`, { ttlSeconds: 3600 })));
    const today = Date.parse(`${dateOf(Date.now())}T00:00:00Z`);
    const from = dateOf(today - 365 * 86_400_000);
    const to = dateOf(today);
    const groups: readonly GroupBy[] = ['day', 'model'];
    const samples: Record<GroupBy, number[]> = { day: [], model: [], provider: [] };
    let bad = '';
    const iteration = async (record: boolean, late = 0): Promise<void> => {
      const u = Math.floor(Math.random() * users);
      const groupBy = groups[Math.floor(Math.random() * groups.length)] ?? 'day';
      const r = await load.get(`/api/advisor/usage?from=${from}&to=${to}&groupBy=${groupBy}`, { authorization: `Bearer ${tokens[u] ?? ''}` }, !record);
      if (r.status !== 200) bad ||= `${groupBy}: ${r.status} ${r.body.slice(0, 200)}`;
      else if (!record) {
        const body = JSON.parse(r.body) as { total?: { turns?: number } };
        // 366 of the 730 days: about half the turns.
        if (!body.total?.turns || body.total.turns < TURNS_PER_USER * 0.45) bad ||= `a year held ${body.total?.turns} turns`;
      }
      if (record) samples[groupBy].push(late + r.ms);
    };
    await load.run(CLIENTS, 1500, () => iteration(false));
    await load.run(1, h.quick ? 2000 : 5000, () => iteration(true));
    const alone = distribution([...samples.day.splice(0), ...samples.model.splice(0)]);
    const cpu0 = cpuMs(service.pid);
    const { wallMs } = await load.run(CLIENTS, durationMs, () => iteration(true));
    const cpu = cpuMs(service.pid) - cpu0;
    if (bad) throw new Error(bad);
    const all = distribution([...samples.day, ...samples.model]);
    const day = distribution(samples.day);
    const model = distribution(samples.model);
    const rps = (all.n * 1000) / wallMs;

    // The same clients at half that rate, arriving at random: the load a service is run at, rather than
    // its ceiling (each request timed from when it was due, so a client that fell behind counts its wait).
    samples.day.length = 0;
    samples.model.length = 0;
    const pacedRps = Math.round(rps * PACED_SHARE);
    await load.paced(CLIENTS, durationMs, pacedRps, (_w, dueAt) => iteration(true, performance.now() - dueAt));
    if (bad) throw new Error(bad);
    const paced = distribution([...samples.day, ...samples.model]);
    const sqlDist = await sqlBaseline(h, users, from, to, durationMs);
    return {
      id: 'usage',
      title: 'Usage summary',
      service: `p50 ${ms(all.p50)} ms, p99 ${ms(all.p99)} ms · ${int(rps)} req/s · ${((cpu * 1000) / all.n).toFixed(0)} µs CPU/req`,
      baseline: `p50 ${ms(sqlDist.p50)} ms, p99 ${ms(sqlDist.p99)} ms (the summary statement alone, pg, same ${CLIENTS} clients)`,
      result:
        `p99 ${ms(alone.p99)} ms a request at a time; under load p99 ${ms(paced.p99)} ms at ${CLIENTS} clients sending ${int(pacedRps)} req/s ` +
        `(half the ceiling), ${ms(all.p99)} ms at the ceiling (closed loop, ${(all.p99 / sqlDist.p99).toFixed(1)}× the statement's)`,
      goal: `p99 ≤ ${GOAL_MS} ms for a user with 100,000 turns (judged a request at a time)`,
      met: alone.p99 <= GOAL_MS,
      how:
        `${int(users)} users with ${int(TURNS_PER_USER)} turns each over ${DAYS} days on ${MODELS.length} models, seeded as the ` +
        `${int(slots)} rows per user those turns leave in usage_daily (one per UTC day, provider and model, written day after day with ` +
        `users interleaved; ${(seedMs / 1000).toFixed(1)} s with VACUUM ANALYZE). Each request asks a random user's last 366 days grouped ` +
        'by day (366 rows, zero-filled) or by model; latency per request at the client. First one client in a loop ' +
        `for ${h.quick ? 2 : 5} s ("a request at a time", the goal's judge: it asks what a user's 100,000 turns cost a request, without ` +
        `queueing behind others); then ${CLIENTS} clients in a closed loop for ${durationMs / 1000} s (the ceiling, where every request ` +
        'queues behind the others on this 2-core machine shared by the load generator, PostgreSQL and the service); then the same ' +
        `clients for ${durationMs / 1000} s at half that rate, arriving at random (Poisson), each request timed from when it was due. ` +
        `Baseline: the service's own summary statement (its repo function, through Kysely on a pg pool of ${CLIENTS}) from ${CLIENTS} ` +
        'concurrent loops.',
      notes: [
        `paced p50 ${ms(paced.p50)} ms, p99 ${ms(paced.p99)} ms, max ${ms(paced.max)} ms; closed loop groupBy=day p50 ${ms(day.p50)} / p99 ${ms(day.p99)} ms, groupBy=model p50 ${ms(model.p50)} / p99 ${ms(model.p99)} ms, ` +
          `max ${ms(all.max)} ms; one client alone p50 ${ms(alone.p50)} ms, p99 ${ms(alone.p99)} ms`,
      ],
    };
  } finally {
    await load.close();
    await service.stop();
  }
}

async function sqlBaseline(h: Harness, users: number, from: string, to: string, durationMs: number): Promise<ReturnType<typeof distribution>> {
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: h.stores.databaseUrl, max: CLIENTS }) }) });
  try {
    return await closedLoops(CLIENTS, durationMs, () =>
      summary(db, `usage-${Math.floor(Math.random() * users)}`, from, to, Math.random() < 0.5 ? 'day' : 'model'),
    );
  } finally {
    await db.destroy();
  }
}
