// Row 6: the key-save overhead, measured by bench/key-save.ts (the keys feature's own benchmark),
// run as a child process on this run's database and Redis; its table row is read from its output.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { startScriptFlags, type Harness } from '../lib/harness.ts';
import { ROOT, tail } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';

const SCRIPT = path.join(ROOT, 'bench', 'key-save.ts');
const TIMEOUT_MS = 300_000;

/** One run of bench/key-save.ts; its table row, parsed. */
interface KeySaveRun {
  readonly users: string;
  readonly thinkMs: string;
  readonly saves: string;
  readonly s50: string;
  readonly s99: string;
  readonly p50: string;
  readonly p99: string;
  readonly o50: string;
  readonly o99: string;
  readonly cpu: string;
  /** The floor's overhead (a bare server doing only what every save must), and the service's as a multiple of it. */
  readonly floor50: string;
  readonly floor99: string;
  readonly ratio: string;
}

async function runKeySave(h: Harness, name: string, args: string[]): Promise<KeySaveRun> {
  // The script prints its table row when done; the process is tracked (and stopped on failure) like the others.
  const child = await h.procs.startNode(name, SCRIPT, {
    // The service runs in that process: with the node flags of `npm start`, as deployed.
    nodeArgs: startScriptFlags(ROOT),
    args: ['--no-write', ...args],
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: h.stores.databaseUrl, REDIS_URL: h.stores.redisUrl },
    ready: /^(\| \d{4}-\d{2}-\d{2} \|.*)$/m,
    timeoutMs: TIMEOUT_MS,
  });
  const code = await child.exited(30_000);
  const out = child.log();
  if (code !== 0) throw new Error(`bench/key-save.ts exited ${code}: ${tail(out, 8)}`);
  // | date | machine | users | think ms | saves | save p50 | save p99 | probe p50 | probe p99 | overhead p50 | overhead p99 | CPU µs/save | floor p50 | floor p99 | ratio |
  const line = out.split('\n').find((l) => /^\| \d{4}-\d{2}-\d{2} \|/.test(l));
  const cells =
    line
      ?.split('|')
      .slice(1, -1)
      .map((c) => c.trim().replaceAll('*', '')) ?? [];
  if (cells.length < 15) throw new Error(`no result row in bench/key-save.ts output: ${tail(out, 8)}`);
  const [users, thinkMs, saves, s50, s99, p50, p99, o50, o99, cpu, floor50, floor99, ratio] = cells.slice(2, 15) as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  return { users, thinkMs, saves, s50, s99, p50, p99, o50, o99, cpu, floor50, floor99, ratio };
}

export async function keySave(h: Harness): Promise<Row> {
  const title = 'Key-save overhead';
  if (!existsSync(SCRIPT)) {
    return {
      id: 'keysave',
      title,
      service: 'not measured',
      baseline: '—',
      result: 'bench/key-save.ts is absent',
      goal: 'p50 ≤ +2 ms',
      met: undefined,
      how: "bench/key-save.ts (the keys feature's benchmark) is not in the tree.",
    };
  }
  // 20 users at a human pace (a save a second each, on average: far above the 10 an hour the limit
  // lets a user make), then the same 20 with no pause at all (the machine's ceiling), then one user.
  const paced = await runKeySave(h, 'key-save-paced', ['--concurrency', '20', '--think-ms', '1000', '--saves', h.quick ? '200' : '800']);
  const flat = await runKeySave(h, 'key-save-flat', ['--concurrency', '20', '--think-ms', '0', '--saves', h.quick ? '400' : '2000']);
  const one = await runKeySave(h, 'key-save-one', ['--concurrency', '1', '--think-ms', '0', '--saves', h.quick ? '200' : '1000']);
  const overhead50 = Number(paced.o50);
  const show = (r: KeySaveRun): string => `+${r.o50} ms p50, +${r.o99} ms p99`;
  return {
    id: 'keysave',
    title,
    service: `20 paced users: save p50 ${paced.s50} ms, p99 ${paced.s99} ms · ${paced.cpu} µs service CPU/save`,
    baseline:
      `probe alone p50 ${paced.p50} ms, p99 ${paced.p99} ms; the floor (a bare server doing only what every save must) ` +
      `+${paced.floor50} ms p50, +${paced.floor99} ms p99 beyond it`,
    result:
      `20 paced users ${show(paced)} (${paced.ratio}× the floor's overhead); 20 users without pause ${show(flat)} ` +
      `(${flat.ratio}× the floor's); one user ${show(one)} (${one.ratio}× the floor's)`,
    goal: 'p50 ≤ +2 ms at 20 concurrent users',
    met: Number.isFinite(overhead50) ? overhead50 <= 2 : undefined,
    how:
      'From `bench/key-save.ts` (the keys feature\'s own benchmark; see its section "Key saves"), run as child processes on ' +
      `this run's database and Redis, three times: ${paced.users} users each waiting a random think time (exponential, mean ` +
      `${paced.thinkMs} ms) between saves (${paced.saves} saves; the goal's measure), the same ${flat.users} users with no pause ` +
      `(${flat.saves} saves: the machine's ceiling, where every save queues behind the others), and ${one.users} user with no ` +
      `pause (${one.saves} saves), each after 2000 saves and 2000 bare probes without pause (the JIT's warm-up, so that both ` +
      'run optimised code, as a deployed instance does). Rounds of saves alternate with rounds of the bare provider probe against the same fake, by ' +
      'the same users; overhead = save − probe percentile. A third kind of round times the floor: a bare node:http server in ' +
      'the same process doing only what the rules make every save do, in their order (token, Redis verdict, body, probe, ' +
      'AES-GCM seal, the same upsert through a bare pg pool with its commit, the answer), with none of the framework, ' +
      'hooks, validation, logging or metrics; its overhead is the cost of those hops on this machine. Unlike the rows ' +
      'above, that script runs the service in-process (main thread) with the fake and the load on worker threads.',
    notes: [
      `without pause: save p50 ${flat.s50} ms, p99 ${flat.s99} ms, probe p50 ${flat.p50} ms, ${flat.cpu} µs service CPU/save, ` +
        `floor +${flat.floor50} ms p50; one user: save p50 ${one.s50} ms, probe p50 ${one.p50} ms, ${one.cpu} µs service ` +
        `CPU/save, floor +${one.floor50} ms p50`,
    ],
  };
}
