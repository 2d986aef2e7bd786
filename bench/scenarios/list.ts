// Row 4: GET /api/advisor/conversations (first page, then the page after its cursor) for random users
// of a 1,000,000-conversation table; baseline: the same keyset query straight on PostgreSQL.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { DB } from '../../src/db/types.ts';
import { conversationPageQuery } from '../../src/features/conversations/repo.ts';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { Harness } from '../lib/harness.ts';
import { HttpLoad } from '../lib/http-load.ts';
import { stealMs } from '../lib/machine.ts';
import { cpuMs } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { seedConversations } from '../lib/seed.ts';
import { closedLoops, distribution, int, median, ms } from '../lib/stats.ts';
import { mintToken } from '../../src/http/auth.ts';
import { TEST_JWT_SECRET } from '../../test/helpers/app.ts';

const CLIENTS = 50;
const PAGE = 25;
/** The paced run's rate, as a share of the rate the closed loop reached. */
const PACED_SHARE = 0.5;

export async function list(h: Harness): Promise<Row> {
  const users = h.quick ? 2000 : 10_000;
  const perUser = 100;
  const durationMs = h.quick ? 5000 : 20_000;
  const service = await h.startService('service-list');
  const load = new HttpLoad(service.ready, CLIENTS);
  try {
    const t0 = performance.now();
    await seedConversations(h.stores.pool, users, perUser);
    const seedMs = performance.now() - t0;
    // No tier claim: these users stay on the default tier, as most readers of a list are.
    const tokens = await Promise.all(Array.from({ length: users }, (_, i) => mintToken(TEST_JWT_SECRET, `list-${i}`, { ttlSeconds: 4 * 3600 })));
    const auth = (i: number): Record<string, string> => ({ authorization: `Bearer ${tokens[i] ?? ''}` });
    // Steady state: every user has been seen by this process once (its first request writes the user).
    await load.each(users, CLIENTS, async (i) => {
      const r = await load.get('/api/billing/packs', auth(i));
      if (r.status !== 200) throw new Error(`warm-up answered ${r.status}: ${r.body}`);
    });
    const first: number[] = [];
    const second: number[] = [];
    // Paced requests, by request id: when each was due or sent (epoch ms) and its time at the client,
    // to set beside the service's own log line for the same id (`attribute`).
    const traced = new Map<string, { at: number; ms: number }>();
    let tracing = false;
    let seq = 0;
    const get = async (path: string, u: number, keepBody: boolean, late = 0) => {
      if (!tracing) return load.get(path, auth(u), keepBody);
      const id = `list-trace-${++seq}`;
      const at = performance.timeOrigin + performance.now() - late;
      const r = await load.get(path, { ...auth(u), 'x-request-id': id }, keepBody);
      traced.set(id, { at, ms: late + r.ms });
      return r;
    };
    let bad = '';
    // `dueAt`: when a paced iteration was due; its first request is timed from then.
    const iteration = async (record: boolean, dueAt?: number): Promise<void> => {
      const u = Math.floor(Math.random() * users);
      const late = dueAt === undefined ? 0 : performance.now() - dueAt;
      const a = await get('/api/advisor/conversations', u, true, late);
      const page = JSON.parse(a.body) as { items?: unknown[]; nextCursor?: string | null };
      if (a.status !== 200 || page.items?.length !== PAGE || typeof page.nextCursor !== 'string') {
        bad ||= `first page: ${a.status} ${a.body.slice(0, 200)}`;
        return;
      }
      const b = await get(`/api/advisor/conversations?cursor=${encodeURIComponent(page.nextCursor)}`, u, false);
      if (b.status !== 200) bad ||= `second page: ${b.status} ${b.body.slice(0, 200)}`;
      if (record) {
        first.push(late + a.ms);
        second.push(b.ms);
      }
    };
    await load.run(CLIENTS, 2000, () => iteration(false));
    // Unloaded, for contrast: one client, so the time is the request's own, without queueing.
    await load.run(1, 2000, () => iteration(true));
    const alone = distribution([...first.splice(0), ...second.splice(0)]);
    const cpu0 = cpuMs(service.pid);
    const { wallMs } = await load.run(CLIENTS, durationMs, () => iteration(true));
    const cpu = cpuMs(service.pid) - cpu0;
    if (bad) throw new Error(bad);
    const all = distribution([...first, ...second]);
    const d1 = distribution(first);
    const d2 = distribution(second);
    const rps = (all.n * 1000) / wallMs;

    // The same clients at half that rate: the load a service is run at, rather than its ceiling.
    first.length = 0;
    second.length = 0;
    const pacedRps = Math.round(rps * PACED_SHARE);
    // The load generator's own stalls (its GC, the OS) count in the client-side times; recorded to tell.
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    const steal0 = stealMs();
    tracing = true;
    await load.paced(CLIENTS, durationMs, pacedRps / 2, (_w, dueAt) => iteration(true, dueAt));
    const steal1 = stealMs();
    tracing = false;
    loop.disable();
    const pacedSteal = steal0 === undefined || steal1 === undefined ? 'n/a' : `${steal1 - steal0} ms`;
    if (bad) throw new Error(bad);
    const paced = distribution([...first, ...second]);
    const slow = attribute(traced, service.log(), 10);

    const sqlDist = await sqlBaseline(h, users, h.quick ? 3000 : 5000);
    return {
      id: 'list',
      title: 'Conversation list',
      service: `p50 ${ms(all.p50)} ms, p99 ${ms(all.p99)} ms · ${int(rps)} req/s · ${((cpu * 1000) / all.n).toFixed(0)} µs CPU/req`,
      baseline: `p50 ${ms(sqlDist.p50)} ms, p99 ${ms(sqlDist.p99)} ms (the first-page statement alone, pg, same 50 clients closed loop)`,
      result:
        `p99 ${ms(paced.p99)} ms at ${CLIENTS} clients sending ${int(pacedRps)} req/s (half the ceiling); ` +
        `p99 ${ms(all.p99)} ms at the ceiling (closed loop); ${ms(alone.p99)} ms alone`,
      goal: `p99 ≤ 10 ms (judged at half the ceiling)`,
      met: paced.p99 <= 10,
      how:
        `${int(users * perUser)} conversations across ${int(users)} users (${perUser} each), inserted with one insert … select from ` +
        `generate_series (${(seedMs / 1000).toFixed(0)} s with ANALYZE). ${CLIENTS} concurrent clients, each in a loop: a random ` +
        `user's first page (${PAGE} items), then the page after its cursor; ${durationMs / 1000} s after a 2 s warm-up, every user ` +
        'having been seen once before (steady state; a first request writes the user). Latency per request at the client; ' +
        'req/s counts both pages; "alone" is one client in the same loop for 2 s, before the loaded run. Then the same ' +
        `${CLIENTS} clients for ${durationMs / 1000} s at ${PACED_SHARE * 100}% of the closed loop's rate, arriving at random (Poisson; ` +
        'each first page timed from when it was due, so a client that fell behind counts its wait; each carries a request id, and ' +
        "those over 10 ms are set beside the service's log line for the same id, to tell time before the service began " +
        'the request, in it and after it). The closed loop ' +
        'measures the ceiling: with 50 clients and no pause every request queues behind the others, so its latency is ' +
        '50 / throughput on this 2-core machine, where the load generator, PostgreSQL and the service share the cores ' +
        '(the SQL baseline alone misses 10 ms there too). The table is vacuumed, analyzed and checkpointed after the seed ' +
        '(steady state: otherwise autovacuum works through the fresh rows during the measurement). CPU per request as ' +
        "in the JSON row. Baseline: the service's own first-page statement (compiled from its repo) sent straight to PostgreSQL by a 20-connection " +
        `pg pool (the service's pool size) from ${CLIENTS} concurrent loops.`,
      notes: [
        `first page p50 ${ms(d1.p50)} / p99 ${ms(d1.p99)} ms, second page p50 ${ms(d2.p50)} / p99 ${ms(d2.p99)} ms, max ${ms(all.max)} ms; ` +
          `one client alone (no queueing): p50 ${ms(alone.p50)} ms, p99 ${ms(alone.p99)} ms; ` +
          `paced (${int(pacedRps)} req/s): p50 ${ms(paced.p50)} ms, p99 ${ms(paced.p99)} ms, max ${ms(paced.max)} ms; ` +
          `the load generator's own event-loop delay meanwhile: p99 ${ms(loop.percentile(99) / 1e6)} ms, max ${ms(loop.max / 1e6)} ms; ` +
          `CPU steal meanwhile: ${pacedSteal}; ${slow}`,
      ],
    };
  } finally {
    await load.close();
    await service.stop();
  }
}

async function sqlBaseline(h: Harness, users: number, durationMs: number): Promise<ReturnType<typeof distribution>> {
  const pool = new pg.Pool({ connectionString: h.stores.databaseUrl, max: 20 });
  pool.on('error', () => undefined);
  // The statement the service's repo sends for a first page, compiled by Kysely (no connection made),
  // run as a named prepared statement as the service runs it; only the user changes.
  const compiler = new Kysely<DB>({ dialect: new PostgresDialect({ pool: async () => Promise.reject(new Error('compile only')) }) });
  const marker = 'list-user-marker';
  const compiled = conversationPageQuery(marker, PAGE, undefined).compile(compiler);
  const at = compiled.parameters.indexOf(marker);
  try {
    return await closedLoops(CLIENTS, durationMs, () => {
      const values = [...compiled.parameters];
      values[at] = `list-${Math.floor(Math.random() * users)}`;
      return pool.query({ name: 'list-page', text: compiled.sql, values });
    });
  } finally {
    await pool.end();
  }
}

/**
 * Where the paced requests slower than `overMs` spent their time, set beside the service's log line
 * for each (its `time` is when it answered, its `ms` the time it spent): before the service began
 * the request (the load generator's lateness, the network, the service's event loop busy), inside
 * it, and after it answered. Medians over those requests; the log's clock has 1 ms resolution.
 */
function attribute(traced: ReadonlyMap<string, { at: number; ms: number }>, log: string, overMs: number): string {
  const served = new Map<string, { end: number; ms: number }>();
  for (const line of log.split('\n')) {
    if (!line.includes('"list-trace-')) continue;
    const entry = JSON.parse(line) as { reqId?: string; time?: string; ms?: number };
    if (entry.reqId && entry.time && typeof entry.ms === 'number') served.set(entry.reqId, { end: Date.parse(entry.time), ms: entry.ms });
  }
  const before: number[] = [];
  const inside: number[] = [];
  const after: number[] = [];
  let slow = 0;
  for (const [id, c] of traced) {
    if (c.ms <= overMs) continue;
    slow++;
    const s = served.get(id);
    if (!s) continue;
    before.push(s.end - s.ms - c.at);
    inside.push(s.ms);
    after.push(c.at + c.ms - s.end);
  }
  const share = ((slow / Math.max(1, traced.size)) * 100).toFixed(2);
  if (slow === 0) return `no paced request over ${overMs} ms`;
  return (
    `${int(slow)} paced requests over ${overMs} ms (${share} %), their time (medians) before the service began them ` +
    `${ms(median(before), 1)} ms, in the service ${ms(median(inside), 1)} ms, after it answered ${ms(median(after), 1)} ms`
  );
}
