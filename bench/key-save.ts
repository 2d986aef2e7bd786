// Key-save overhead beyond the provider probe (DESIGN §6), on PostgreSQL + Redis:
//   npx node [npm start's node flags] bench/key-save.ts [--saves 2000] [--concurrency 20] [--think-ms 0] [--warmup 2000] [--no-write]
//   (npm run bench runs it with the flags of the `start` script, as the service is deployed)
// The service runs on the main thread, as one instance does in production; the provider fake (which
// answers at once) and the load generator run on worker threads of their own, so neither borrows the
// service's event loop. The load generator alternates rounds of bare probes (the service's own probe
// function, straight to the fake) with rounds of full saves over HTTP at the same concurrency;
// overhead is the save percentile minus the bare-probe percentile. Both sides go out through undici
// (the probe's own client; an undici Pool for the saves), so the load generator costs the same on
// both. A third round type times the floor: a bare node:http server in the same process doing only
// what the rules make every save do, in their order (token, Redis verdict, body, probe, AES-GCM seal,
// the same upsert through a bare pg pool, with its commit, then the answer); its overhead is what
// this machine's hops cost, and the service's is reported beside it. Each user waits a think time
// drawn from an exponential distribution with mean --think-ms after each call (a constant one would
// keep the users in lockstep, arriving in bursts).
// Writes docs/PERFORMANCE.md.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import pg from 'pg';
import type { Deps } from '../src/deps.ts';
import { saveActiveProviderKeyQuery } from '../src/features/advisor-keys/repo.ts';
import { providerSlot, sealedColumns } from '../src/features/advisor-keys/sealing.ts';
import { bearerToken } from '../src/http/auth.ts';
import type { RateLimitRule } from '../src/platform/rate-limiter.ts';
import { probeProviderKey } from '../src/providers/llm/probes.ts';
import { machine } from './lib/machine.ts';
import { distribution, ms } from './lib/stats.ts';

const SAVES_PER_USER = 10; // the rolling-hour limit: each user saves at most this many times
const ROUNDS = 4;
/** The floor's own window (as the service's, under another name): the floor never eats a user's saves. */
const FLOOR_RULE: RateLimitRule = { name: 'bench-floor-key-saves', limit: SAVES_PER_USER, windowMs: 3_600_000 };
const HEADER = [
  '| date | machine (nproc × CPU) | concurrent users | think ms | saves | save p50 ms | save p99 ms | bare probe p50 ms | bare probe p99 ms | overhead p50 ms | overhead p99 ms | service CPU µs/save | floor overhead p50 ms | floor overhead p99 ms | service ÷ floor (p50 overhead) |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
].join('\n');

interface ClientJob {
  role: 'client';
  address: string;
  floorAddress: string;
  fakeUrl: string;
  apiKey: string;
  tokens: string[];
  perRound: number;
  concurrency: number;
  thinkMs: number;
  warmup: number;
}

if (isMainThread) await main();
else if ((workerData as { role: string }).role === 'fake') await fakeWorker();
else await clientWorker(workerData as ClientJob);

async function fakeWorker(): Promise<void> {
  const { startOpenAiCompatibleFake } = await import('../test/fakes/index.ts');
  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  parentPort?.postMessage({ url: fake.url, apiKey: fake.validKey });
  parentPort?.once('message', () => void fake.close().then(() => process.exit(0)));
}

async function clientWorker(job: ClientJob): Promise<void> {
  const { Pool } = await import('undici');
  const body = JSON.stringify({ apiKey: job.apiKey });
  // The service and the floor each see every user at most SAVES_PER_USER times.
  const saver = (address: string) => {
    const pool = new Pool(address, { connections: job.concurrency });
    let next = 0;
    return async (): Promise<number> => {
      const token = job.tokens[Math.floor(next++ / SAVES_PER_USER)];
      const started = performance.now();
      const res = await pool.request({
        method: 'PUT',
        path: '/api/advisor/provider-keys/openai',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`${address} answered ${res.statusCode}`);
      return performance.now() - started;
    };
  };
  const save = saver(job.address);
  const floorSave = saver(job.floorAddress);
  const probe = async (): Promise<number> => {
    const started = performance.now();
    const r = await probeProviderKey('openai', job.apiKey, { baseUrl: job.fakeUrl, timeoutMs: 5000 });
    if (r.outcome !== 'valid') throw new Error(`probe: ${r.outcome}`);
    return performance.now() - started;
  };
  const run = async (n: number, op: () => Promise<number>, thinkMs = job.thinkMs): Promise<number[]> => {
    const samples: number[] = [];
    let left = n;
    await Promise.all(
      Array.from({ length: job.concurrency }, async () => {
        // Users start at random points of a think time, not all at once.
        if (thinkMs > 0) await delay(Math.random() * thinkMs);
        while (left-- > 0) {
          samples.push(await op());
          if (thinkMs > 0) await delay(-thinkMs * Math.log(1 - Math.random()));
        }
      }),
    );
    return samples;
  };
  // Warm-up without pauses, until the JIT has compiled the hot paths of both sides (a deployed
  // instance has served many saves before this one; a cold one runs bytecode).
  await run(job.warmup, probe, 0);
  await run(job.warmup, save, 0);
  await run(job.warmup, floorSave, 0);
  const probes: number[] = [];
  const saves: number[] = [];
  const floor: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    probes.push(...(await run(job.perRound, probe)));
    // The service (main thread) reads its own thread's CPU time around each round of saves.
    parentPort?.postMessage({ edge: 'start' });
    saves.push(...(await run(job.perRound, save)));
    parentPort?.postMessage({ edge: 'end' });
    floor.push(...(await run(job.perRound, floorSave)));
  }
  parentPort?.postMessage({ probes, saves, floor });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      saves: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '20' },
      'think-ms': { type: 'string', default: '0' },
      warmup: { type: 'string', default: '2000' },
      'no-write': { type: 'boolean', default: false },
    },
  });
  const concurrency = Number(values.concurrency);
  const thinkMs = Number(values['think-ms']);
  const warmup = Number(values.warmup);
  const perRound = Math.ceil(Number(values.saves) / ROUNDS);
  process.env.DATABASE_URL ??= 'postgres://postgres@127.0.0.1:5432/test';
  process.env.REDIS_URL ??= 'redis://127.0.0.1:6379';
  // Imported after the env is set: the helper reads the stores once.
  const { buildTestApp } = await import('../test/helpers/app.ts');

  const fakeThread = new Worker(new URL(import.meta.url), { workerData: { role: 'fake' } });
  const fake = await new Promise<{ url: string; apiKey: string }>((resolve) => fakeThread.once('message', resolve));
  const t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url } });
  let closeFloor = async (): Promise<void> => undefined;
  try {
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const floorPool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20, options: `-c search_path="${await currentSchema(t.deps.db)}"` });
    const floorServer = startFloor(t.deps, fake.url, floorPool);
    closeFloor = async () => {
      floorServer.closeAllConnections();
      await new Promise((resolve) => floorServer.close(resolve));
      await floorPool.end();
    };
    const floorAddress = await new Promise<string>((resolve) =>
      floorServer.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(floorServer.address() as AddressInfo).port}`)),
    );
    const users = Math.ceil((perRound * ROUNDS + warmup) / SAVES_PER_USER) + 1;
    const tokens = await Promise.all(Array.from({ length: users }, (_, i) => t.token(`bench-${i}`)));
    // Users are written on first sight; do that before measuring, as in steady state.
    await Promise.all(tokens.map((tk) => fetch(`${address}/api/advisor/provider-keys`, { headers: { authorization: `Bearer ${tk}` } })));
    const job: ClientJob = { role: 'client', address, floorAddress, fakeUrl: fake.url, apiKey: fake.apiKey, tokens, perRound, concurrency, thinkMs, warmup };
    const client = new Worker(new URL(import.meta.url), { workerData: job });
    let cpuUs = 0;
    let roundStart = process.threadCpuUsage();
    const { probes, saves, floor } = await new Promise<Samples>((resolve, reject) => {
      client.on('message', (m: { edge?: 'start' | 'end' } & Partial<Samples>) => {
        if (m.edge === 'start') roundStart = process.threadCpuUsage();
        else if (m.edge === 'end') {
          const d = process.threadCpuUsage(roundStart);
          cpuUs += d.user + d.system;
        } else resolve(m as Samples);
      });
      client.once('error', reject);
    });
    report(concurrency, thinkMs, { probes, saves, floor }, cpuUs / saves.length, values['no-write'] !== true);
  } finally {
    await closeFloor();
    await t.close();
    fakeThread.postMessage('close');
  }
}

interface Samples {
  probes: number[];
  saves: number[];
  floor: number[];
}

function report(concurrency: number, thinkMs: number, { probes, saves, floor }: Samples, cpuUsPerSave: number, write: boolean): void {
  const [s, p, fl] = [distribution(saves), distribution(probes), distribution(floor)];
  const [s50, s99, p50, p99, f50, f99] = [s.p50, s.p99, p.p50, p.p99, fl.p50, fl.p99];
  const date = new Date().toISOString().slice(0, 10);
  const host = machine();
  const line =
    `| ${date} | ${host.cpus} × ${host.cpuModel} | ${concurrency} | ${thinkMs} | ${saves.length} | ${ms(s50)} | ${ms(s99)} | ${ms(p50)} | ${ms(p99)} | ` +
    `**${ms(s50 - p50)}** | ${ms(s99 - p99)} | ${cpuUsPerSave.toFixed(0)} | ${ms(f50 - p50)} | ${ms(f99 - p99)} | ${((s50 - p50) / (f50 - p50)).toFixed(2)} |`;
  process.stdout.write(`${HEADER}\n${line}\n`);
  if (write) writeSection(line);
}

/**
 * The floor of a save on this machine: a bare node:http server doing what the rules make every save
 * do, in their order, and nothing else (no framework, hooks, schema validation, logging, metrics or
 * query builder at run time; the statement is compiled per save, as cheap as a template). It shares
 * the service's stores, probe function, vault and token check (which caches verified tokens, as the
 * service does), so the difference between the two is the service's own cost.
 */
function startFloor(deps: Deps, fakeUrl: string, pool: pg.Pool): http.Server {
  const save = async (req: http.IncomingMessage): Promise<string> => {
    const user = await deps.auth.verify(bearerToken(req.headers.authorization) ?? '');
    // The verdict comes first: a refused save reads no body and calls no provider.
    if (!(await deps.limiter.hit(FLOOR_RULE, user.id)).allowed) throw new Error('floor: rate limited');
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    const { apiKey } = JSON.parse(raw) as { apiKey: string };
    const probe = await deps.llm.probe('openai', apiKey);
    if (probe.outcome !== 'valid') throw new Error(`floor: probe ${probe.outcome}`);
    const now = new Date();
    const row = {
      user_id: user.id,
      provider: 'openai',
      ...sealedColumns(deps.vault.seal(apiKey, providerSlot(user.id, 'openai'))),
      key_hint_tail: apiKey.slice(-4),
      default_model: probe.models?.[0] ?? 'gpt-4o',
      active: true,
      last_verified_at: now,
      rejected_at: null,
      rejected_reason: null,
      created_at: now,
      updated_at: now,
    };
    const q = saveActiveProviderKeyQuery(row).compile(deps.db);
    const saved = await pool.query<{ created_at: Date }>({ name: 'floor-save', text: q.sql, values: [...q.parameters] });
    return JSON.stringify({
      provider: row.provider,
      keyHintTail: row.key_hint_tail,
      defaultModel: row.default_model,
      active: true,
      verified: true,
      lastVerifiedAt: now.toISOString(),
      rejectedAt: null,
      rejectedReason: null,
      createdAt: saved.rows[0]?.created_at.toISOString(),
      updatedAt: now.toISOString(),
    });
  };
  return http.createServer((req, res) => {
    save(req).then(
      (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(body),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
}

async function currentSchema(db: Deps['db']): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  if (!rows[0]) throw new Error('no current schema');
  return rows[0].schema;
}

/** Adds the row under "## Key saves", creating the section (or the file) when absent; other sections are left alone. */
function writeSection(line: string): void {
  const file = path.join(import.meta.dirname, '..', 'docs', 'PERFORMANCE.md');
  const current = existsSync(file) ? readFileSync(file, 'utf8') : '# Performance\n';
  const start = current.indexOf('## Key saves');
  if (start >= 0) {
    // Append the row to the section's first table when it has this header; otherwise (the columns
    // changed) start a new table above the earlier ones.
    const end = current.indexOf('\n## ', start + 1);
    const section = current.slice(start, end < 0 ? current.length : end);
    const tableAt = section.indexOf('\n|');
    const sameHeader = tableAt >= 0 && section.startsWith(HEADER.split('\n')[0] ?? '', tableAt + 1);
    const blankAfter = tableAt < 0 ? -1 : section.indexOf('\n\n', tableAt + 1);
    const rowEnd = blankAfter < 0 ? section.length : blankAfter;
    const updated =
      tableAt < 0
        ? `${section.replace(/\n*$/, '')}\n\n${HEADER}\n${line}\n`
        : sameHeader
          ? `${section.slice(0, rowEnd)}\n${line}${section.slice(rowEnd)}`
          : `${section.slice(0, tableAt + 1)}${HEADER}\n${line}\n\n${section.slice(tableAt + 1)}`;
    writeFileSync(file, `${current.slice(0, start)}${updated}${end < 0 ? '' : current.slice(end)}`);
    return;
  }
  const section = [
    '## Key saves',
    '',
    '`npx node bench/key-save.ts [--concurrency 20] [--think-ms 0] [--saves 2000] [--warmup 2000]` on PostgreSQL + Redis (`DATABASE_URL` / `REDIS_URL`,',
    'default 127.0.0.1). Users save provider keys over HTTP, closed loop (each user at most 10 times, the rolling-hour',
    'limit), against a loopback fake that answers the probe at once. The service has the main thread; the fake and the',
    "load generator run on worker threads. Rounds of bare probes (the service's probe function, same fake, same",
    "concurrency) alternate with rounds of saves, after a warm-up of --warmup probes and saves without pause (the JIT's);",
    'overhead = save percentile − bare-probe percentile. Rounds of floor saves (a bare node:http server doing only what',
    "every save must, in the order the rules fix, on the same stores) give this machine's floor beside it. It covers HTTP,",
    'JWT verification, the Redis rate limit, validation, AES-GCM sealing and the PostgreSQL transaction. Goal: overhead',
    'p50 ≤ 2 ms at 20 concurrent users.',
    '',
    HEADER,
    line,
    '',
  ].join('\n');
  writeFileSync(file, `${current.replace(/\n*$/, '\n\n')}${section}`);
}
