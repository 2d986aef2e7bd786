// Row 6: the key-save overhead, measured by bench/key-save.ts (the keys feature's own benchmark),
// run as a child process on this run's database and Redis; its table row is read from its output.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Harness } from '../lib/harness.ts';
import { ROOT, tail } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';

const SCRIPT = path.join(ROOT, 'bench', 'key-save.ts');
const TIMEOUT_MS = 240_000;

export async function keySave(h: Harness): Promise<Row> {
  const title = 'Key-save overhead';
  if (!existsSync(SCRIPT)) {
    return { id: 'keysave', title, service: 'not measured', baseline: '—', result: 'bench/key-save.ts is absent', goal: 'p50 ≤ +2 ms', met: undefined, how: 'bench/key-save.ts (the keys feature\'s benchmark) is not in the tree.' };
  }
  const args = ['--no-write', ...(h.quick ? ['--saves', '400'] : [])];
  // The script prints its table row when done; the process is tracked (and stopped on failure) like the others.
  const child = await h.procs.startNode('key-save', SCRIPT, {
    args,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: h.stores.databaseUrl, REDIS_URL: h.stores.redisUrl },
    ready: /^(\| \d{4}-\d{2}-\d{2} \|.*)$/m,
    timeoutMs: TIMEOUT_MS,
  });
  const code = await child.exited(30_000);
  const out = child.log();
  if (code !== 0) throw new Error(`bench/key-save.ts exited ${code}: ${tail(out, 8)}`);
  // | date | machine | users | think ms | saves | save p50 | save p99 | probe p50 | probe p99 | overhead p50 | overhead p99 |
  const line = out.split('\n').find((l) => /^\| \d{4}-\d{2}-\d{2} \|/.test(l));
  const cells = line?.split('|').slice(1, -1).map((c) => c.trim().replaceAll('*', '')) ?? [];
  if (cells.length < 11) throw new Error(`no result row in bench/key-save.ts output: ${tail(out, 8)}`);
  const [, , users, thinkMs, saves, s50, s99, p50, p99, o50, o99] = cells;
  const overhead50 = Number(o50);
  return {
    id: 'keysave',
    title,
    service: `save p50 ${s50} ms, p99 ${s99} ms`,
    baseline: `probe alone p50 ${p50} ms, p99 ${p99} ms`,
    result: `+${o50} ms p50, +${o99} ms p99`,
    goal: 'p50 ≤ +2 ms',
    met: Number.isFinite(overhead50) ? overhead50 <= 2 : undefined,
    how:
      `From \`bench/key-save.ts ${args.join(' ')}\` (the keys feature's own benchmark; see its section "Key saves"), run as a ` +
      `child process on this run's database and Redis: ${saves} saves by ${users} concurrent users (think time ${thinkMs} ms), ` +
      'alternating with rounds of the bare provider probe against the same fake; overhead = save − probe percentile. Unlike ' +
      'the rows above, that script runs the service in-process (main thread) with the fake and the load on worker threads.',
  };
}
