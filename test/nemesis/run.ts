// `npm run nemesis [-- --seed N] [--minutes M] [--users U]`: three service instances on a PostgreSQL
// cluster and a redis-server of the nemesis's own, under a load of users, while a fault schedule drawn
// from the seed strikes; after the faults heal, the checker proves the invariants of issue 41.
// Exit 0: no violation; 1: violations (listed); 2: the nemesis itself could not run. docs/NEMESIS.md.
import { randomInt } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startOpenAiCompatibleFake, startStripeFake, type OpenAiCompatibleFake, type StripeFake } from '../fakes/index.ts';
import type { Cluster } from '../cluster/cluster.ts';
import { check, INVARIANTS } from './checker.ts';
import { FAULT_KINDS, inflict, NEMESIS_APPLICATION, planFaults } from './faults.ts';
import { Fleet } from './fleet.ts';
import { startOwnPostgres, type OwnPostgres } from './postgres.ts';
import { prng } from './prng.ts';
import { Recorder } from './recorder.ts';
import { Load, MODELS, type UserState } from './users.ts';

const WEBHOOK_SECRET = 'whsec_nemesis';
const INSTANCES = 3;
const HEAL_BOUND_MS = 180_000;

const { values } = parseArgs({
  options: { seed: { type: 'string' }, minutes: { type: 'string', default: '3' }, users: { type: 'string', default: '20' } },
});
const seed = values.seed === undefined ? randomInt(1, 2 ** 31) : Number(values.seed);
const minutes = Number(values.minutes);
const userCount = Number(values.users);
if (!Number.isInteger(seed) || !(minutes > 0) || !Number.isInteger(userCount) || userCount < 1) {
  console.error('usage: npm run nemesis -- [--seed N] [--minutes M] [--users U]');
  process.exit(2);
}
const t0 = Date.now();
const log = (line: string): void => void process.stdout.write(`[nemesis ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);

log(`seed ${seed} (replay: npm run nemesis -- --seed ${seed} --minutes ${minutes} --users ${userCount})`);
const rng = prng(seed);
const plan = planFaults(rng.fork(), minutes, INSTANCES);
log(`${plan.length} faults planned over ${minutes} min: ${plan.map((f) => f.kind).join(', ')}`);

let postgres: OwnPostgres | undefined;
let fake: OpenAiCompatibleFake | undefined;
let stripe: StripeFake | undefined;
let cluster: Cluster | undefined;
let sql: pg.Pool | undefined;
let exitCode = 2;
let closed: Promise<void> | undefined;
/** Everything the nemesis started, stopped once (its PostgreSQL cluster runs as another user: it must not outlive the run). */
const close = (): Promise<void> =>
  (closed ??= (async () => {
    await sql?.end().catch(() => undefined);
    await cluster?.close().catch((err: unknown) => console.error('closing the cluster:', err));
    await Promise.all([fake?.close(), stripe?.close()]).catch(() => undefined);
    await postgres?.stop();
  })());
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping everything started (seed ${seed})`);
    void close().finally(() => process.exit(130));
  });
}
try {
  postgres = await startOwnPostgres(log);
  fake = await startOpenAiCompatibleFake({ flavor: 'openai', models: ['gpt-4o-mini', 'gpt-4.1-mini', 'gpt-4o', 'gpt-4.1'] });
  // A long reply by default (about a second); short and tool-using ones are queued by the users.
  fake.scriptStream({ chunks: Array.from({ length: 24 }, (_, i) => `tok${i} `), delayMs: 40 });
  stripe = await startStripeFake();
  // cluster.ts reads DATABASE_URL when it is loaded: the nemesis's own server.
  process.env.DATABASE_URL = postgres.adminUrl;
  const { startCluster } = await import('../cluster/cluster.ts');
  cluster = await startCluster({
    instances: INSTANCES,
    env: {
      OPENAI_BASE_URL: fake.url,
      STRIPE_SECRET_KEY: stripe.validKey,
      STRIPE_API_BASE: stripe.url,
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      PROVIDER_PROBE_TIMEOUT_MS: '60000',
      STREAM_DETACH_GRACE_MS: '5000',
      RESERVATION_SWEEP_AFTER_MS: '4000',
      RESERVATION_SWEEP_INTERVAL_MS: '500',
      STREAM_HEARTBEAT_MS: '1000',
      SHUTDOWN_DRAIN_MS: '2000',
      // Three pools of 12 stay well under the cluster's max_connections (80), so only the fault exhausts it.
      DATABASE_POOL_SIZE: '12',
    },
  });
  const c = cluster;
  log(
    `PostgreSQL ${postgres.owned ? 'of its own' : 'shared'} (${c.databaseUrl}), ${c.redis.env['REDIS_URL']}, instances ${c.instances.map((i) => i.url).join(' ')}`,
  );
  const fleet = new Fleet(c);
  const rec = new Recorder();
  const load = new Load({ rec, fleet, cluster: c, fake, stripe, webhookSecret: WEBHOOK_SECRET, log });
  const users: UserState[] = Array.from({ length: userCount }, (_, i) => ({
    id: `nemesis-${seed}-${i}`,
    model: MODELS[i % MODELS.length] ?? 'gpt-4.1',
    rng: rng.fork(),
    accountId: undefined,
    trades: new Set<string>(),
    keySaves: 0,
    conversationId: undefined,
    turns: 0,
    seq: 0,
  }));
  load.result.users.push(...users);
  const k = fake.validKey;
  await Promise.all(users.map((u) => load.setUp(u, k)));
  log(`${users.length} users set up (key, account, 1,500 credits bought)`);

  // Load and faults, side by side.
  // The load runs for the minutes asked, and on until every planned fault has struck and healed (each
  // takes its time: a seed's whole schedule is played, whatever the machine's speed).
  const deadline = Date.now() + minutes * 60_000;
  const loops = users.map((u) => load.run(u));
  const faults: Record<string, number> = Object.fromEntries(FAULT_KINDS.map((f) => [f, 0]));
  const skipped: Record<string, number> = {};
  const windows: { kind: string; start: number; end: number }[] = [];
  const p = postgres;
  const faulting = (async () => {
    for (const f of plan) {
      await new Promise((r) => setTimeout(r, f.gapMs));
      const began = Date.now();
      const done = await inflict(f, { cluster: c, fleet, postgres: p }).catch((err: unknown) => {
        log(`fault ${f.kind} failed: ${(err as Error).message}`);
        return false;
      });
      windows.push({ kind: f.kind, start: began, end: Date.now() });
      if (done) faults[f.kind] = (faults[f.kind] ?? 0) + 1;
      else skipped[f.kind] = (skipped[f.kind] ?? 0) + 1;
      log(
        `fault ${f.kind}${f.kind.startsWith('instance') ? ` slot ${f.slot}` : ''}${f.kind === 'redis-frozen' || f.kind === 'pg-connections-exhausted' ? ` ${f.holdMs} ms` : ''}: ${done ? 'done' : 'SKIPPED'} in ${Date.now() - began} ms`,
      );
    }
  })();
  await faulting;
  await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())));
  load.stop();
  await Promise.all(loops);
  log(`load ended: ${users.reduce((n, u) => n + u.turns, 0)} turns started by users, ${rec.chains.length} client chains`);

  // Heal: every instance ready, nothing streaming, nothing reserved.
  sql = new pg.Pool({ connectionString: c.databaseUrl, max: 4, application_name: NEMESIS_APPLICATION });
  sql.on('error', () => undefined);
  const pool = sql;
  const healDeadline = Date.now() + HEAL_BOUND_MS;
  for (;;) {
    const ready = await Promise.all(fleet.slots.map(async (s) => (await fetch(`${s.instance.url}/readyz`).catch(() => undefined))?.status === 200));
    const open = await pool
      .query<{ n: number }>(
        `select (select count(*) from messages where status = 'streaming') + (select count(*) from turn_charges where status = 'reserved') as n`,
      )
      .then((r) => Number(r.rows[0]?.n ?? 1))
      .catch(() => 1);
    if (ready.every(Boolean) && open === 0) break;
    if (Date.now() > healDeadline) {
      log(`not healed after ${HEAL_BOUND_MS} ms (ready ${ready.join(',')}, ${open} open): checking anyway`);
      break;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  log('healed; checking');

  const verdict = await check({
    rec,
    load,
    fleet,
    sql: pool,
    faults: windows,
    async get(user, path) {
      const s = fleet.live()[0];
      if (!s) return { status: 0, json: undefined };
      const res = await fetch(`${s.instance.url}${path}`, { headers: { authorization: `Bearer ${await c.token(user)}` } });
      return { status: res.status, json: await res.json().catch(() => undefined) };
    },
  });

  // The summary.
  const chains = rec.chains.filter((x) => x.turn !== undefined);
  const turnIds = new Set(chains.map((x) => x.turn));
  const statuses: Record<string, number> = {};
  for (const h of rec.http)
    statuses[h.code && h.status >= 400 ? `${h.status} ${h.code}` : String(h.status)] =
      (statuses[h.status >= 400 && h.code ? `${h.status} ${h.code}` : String(h.status)] ?? 0) + 1;
  const r = load.result;
  console.log('\n== nemesis summary');
  console.log(`seed ${seed}, ${minutes} min, ${userCount} users, ${INSTANCES} instances`);
  console.log(
    `turns: ${turnIds.size} (client chains ${chains.length}: ${['own', 'follower', 'probe', 'resend'].map((role) => `${role} ${chains.filter((x) => x.role === role).length}`).join(', ')})`,
  );
  console.log(
    `  ended done ${chains.filter((x) => x.terminal?.event === 'done').length}, error ${chains.filter((x) => x.terminal?.event === 'error').length}, none ${chains.filter((x) => !x.terminal).length}; stops ${r.stops.size}; resends of cut turns ${r.resends.length}`,
  );
  console.log(
    `purchases: ${r.purchases.length} (${r.purchases.filter((x) => x.acknowledged).length} acknowledged, ${r.purchases.reduce((n, x) => n + x.deliveries, 0)} deliveries); trades acknowledged: ${r.users.reduce((n, u) => n + u.trades.size, 0)}; fence probes ${r.probes.length}`,
  );
  console.log(
    `faults: ${Object.entries(faults)
      .map(([kind, n]) => `${kind} ${n}`)
      .join(', ')}${Object.keys(skipped).length > 0 ? `; skipped: ${JSON.stringify(skipped)}` : ''}`,
  );
  console.log(`HTTP statuses: ${JSON.stringify(statuses)}`);
  console.log('invariants checked:');
  const failedBy = new Map<string, number>();
  for (const v of verdict.violations) failedBy.set(v.invariant, (failedBy.get(v.invariant) ?? 0) + 1);
  for (const name of Object.values(INVARIANTS))
    console.log(
      `  ${failedBy.has(name) ? 'FAIL' : 'ok  '} ${name}: ${verdict.checked.get(name) ?? 0} cases${failedBy.has(name) ? `, ${failedBy.get(name)} violations` : ''}`,
    );
  for (const n of verdict.notes) console.log(`note: ${n}`);
  console.log(`violations: ${verdict.violations.length}`);
  for (const v of verdict.violations.slice(0, 60)) console.log(`  - ${v.invariant}\n      ${v.detail}`);
  if (verdict.violations.length > 60) console.log(`  … and ${verdict.violations.length - 60} more`);
  if (verdict.violations.length > 0) console.log(`replay: npm run nemesis -- --seed ${seed} --minutes ${minutes} --users ${userCount}`);
  exitCode = verdict.violations.length > 0 ? 1 : 0;
} catch (err) {
  console.error(`the nemesis could not run (seed ${seed}):`, err);
  exitCode = 2;
} finally {
  await close();
}
process.exit(exitCode);
