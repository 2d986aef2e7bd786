// The benchmark suite: `npm run bench` (all rows, writes docs/PERFORMANCE.md).
//   npm run bench -- --only relay,ttfd   some rows (ids: relay, ttfd, turns, paced, memory, list, search, json, keysave, tools, usage, resume, stop, detached, journal, journal-speed, scale, close, rolling, grounding, pooled)
//   npm run bench -- --quick             smaller sizes, for development
//   --no-write / --write                 skip / force the docs update (partial and quick runs skip it)
//   --profile                            service and floor processes run with --cpu-prof (.bench/<run>/profiles/<n>-<process>.cpuprofile)
//   --keep                               keep .bench/<run>/ (process logs) after the run
//   --service-root <dir>                 measure another checkout of the service (a candidate change)
// DATABASE_URL names a PostgreSQL server where a fresh database may be created (default
// postgres://postgres@127.0.0.1:5432/test); redis-server must be on PATH, and pgbouncer for the close and
// pooled rows (apt-get install pgbouncer, as `.ci/run` does for the pooler suite). Service processes run with
// the node flags of `npm start`; for a diagnosis, BENCH_SERVICE_NODE_FLAGS adds some (e.g. --trace-gc,
// whose lines land in the service's log under .bench/<run>/ with --keep) and BENCH_SERVICE_LOG_LEVEL
// sets its log level (default info). BENCH_SCALE_STREAMS sets the number of open streams of the scale
// and close rows (10,000; 1,000 with --quick), e.g. where the open-file limit (2 per stream in the
// service) is lower.
// A run with a failed row keeps its logs.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { createHarness } from './lib/harness.ts';
import { loadAverage, machine, stealMs } from './lib/machine.ts';
import { Procs, ROOT } from './lib/procs.ts';
import { section, table, writePerformanceDoc, type Row } from './lib/report.ts';
import { startStores } from './lib/stores.ts';
import type { Harness } from './lib/harness.ts';
import { relay } from './scenarios/relay.ts';
import { ttfd } from './scenarios/ttfd.ts';
import { turns } from './scenarios/turns.ts';
import { memory } from './scenarios/memory.ts';
import { list } from './scenarios/list.ts';
import { conversationSearch } from './conversation-search.ts';
import { json } from './scenarios/json.ts';
import { keySave } from './scenarios/key-save-row.ts';
import { tools } from './scenarios/tools.ts';
import { usage } from './scenarios/usage.ts';
import { detached, resume, stop } from './scenarios/resume.ts';
import { journal } from './scenarios/journal.ts';
import { journalSpeed } from './scenarios/journal-speed.ts';
import { scale } from './scenarios/scale.ts';
import { close } from './scenarios/close.ts';
import { rolling } from './scenarios/rolling.ts';
import { paced } from './scenarios/paced.ts';
import { grounding } from './scenarios/grounding.ts';
import { pooled } from './scenarios/pooled.ts';

const SCENARIOS: Record<string, { title: string; run: (h: Harness) => Promise<Row> }> = {
  relay: { title: 'Stream relay throughput', run: relay },
  ttfd: { title: 'Added time to first delta', run: ttfd },
  turns: { title: 'Relay of realistic replies', run: turns },
  paced: { title: 'Paced turns', run: paced },
  memory: { title: 'Memory per open stream', run: memory },
  list: { title: 'Conversation list', run: list },
  search: { title: 'Conversation search', run: conversationSearch },
  json: { title: 'JSON endpoint throughput', run: json },
  keysave: { title: 'Key-save overhead', run: keySave },
  tools: { title: 'Turn with one tool round', run: tools },
  usage: { title: 'Usage summary', run: usage },
  resume: { title: 'Time to resume on another instance', run: resume },
  stop: { title: 'Stop across instances', run: stop },
  detached: { title: 'Memory per detached turn', run: detached },
  journal: { title: 'Trading journal', run: journal },
  'journal-speed': { title: 'Journal pages, reports and back-dated imports', run: journalSpeed },
  scale: { title: 'Open streams on one instance', run: scale },
  close: { title: 'Streams closed at once', run: close },
  rolling: { title: 'Rolling restart under load', run: rolling },
  grounding: { title: 'Grounding check at a turn’s end', run: grounding },
  pooled: { title: 'PostgreSQL CPU per turn behind a transaction pooler', run: pooled },
};
/** The whole run stops (and cleans up) after this, whatever is still going. */
const WATCHDOG_MS = 45 * 60_000;

const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    quick: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    'service-root': { type: 'string' },
  },
});
const only =
  values.only
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean) ?? Object.keys(SCENARIOS);
const unknown = only.filter((id) => !(id in SCENARIOS));
if (unknown.length > 0) {
  process.stderr.write(`unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}\n`);
  process.exit(2);
}
const serviceRoot = values['service-root'] === undefined ? undefined : path.resolve(values['service-root']);
const partial = values.only !== undefined || values.quick || serviceRoot !== undefined;
const write = values.write || (!partial && !values['no-write']);
const args = process.argv.slice(2);
const command = args.length > 0 ? `npm run bench -- ${args.join(' ')}` : 'npm run bench';

const startedAt = performance.now();
const date = new Date().toISOString();
const loadAtStart = loadAverage();
const stealAtStart = stealMs();
const runDir = path.join(ROOT, '.bench', date.replaceAll(':', '-'));
mkdirSync(runDir, { recursive: true });
const log = (msg: string): void => void process.stderr.write(`[bench ${((performance.now() - startedAt) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`);

const procs = new Procs(runDir);
const state: { cleanup?: () => Promise<void>; stopping: boolean } = { stopping: false };
const stopEverything = async (why: string): Promise<never> => {
  state.stopping = true;
  log(`${why}: stopping everything`);
  await state.cleanup?.().catch(() => undefined);
  process.exit(130);
};
process.once('SIGINT', () => void stopEverything('interrupted'));
process.once('SIGTERM', () => void stopEverything('terminated'));
const watchdog = setTimeout(() => void stopEverything(`still running after ${WATCHDOG_MS / 60_000} min`), WATCHDOG_MS);
watchdog.unref();

const rows: Row[] = [];
let failed = false;
const stores = await startStores(procs, process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
let cleaning: Promise<void> | undefined;
// Once, whoever asks first (the run's end or a signal); everyone else waits for the same promise.
const cleanup = (): Promise<void> =>
  (cleaning ??= (async () => {
    await procs.stopAll();
    await stores.close();
    // A failed row keeps the logs: they are what tells why.
    if (!values.keep && !values.profile && !failed) rmSync(runDir, { recursive: true, force: true });
  })());
state.cleanup = cleanup;
try {
  const h = await createHarness(procs, stores, { dir: runDir, quick: values.quick, profile: values.profile, serviceRoot });
  for (const id of only) {
    const scenario = SCENARIOS[id];
    if (!scenario) continue;
    log(`${scenario.title}…`);
    const t0 = performance.now();
    try {
      const row = await scenario.run(h);
      rows.push(row);
      log(`${scenario.title}: ${row.service} | ${row.baseline} | ${row.result} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    } catch (err) {
      failed = true;
      const message = err instanceof Error ? err.message : String(err);
      log(`${scenario.title} FAILED: ${message}`);
      rows.push({
        id,
        title: scenario.title,
        service: 'failed',
        baseline: '—',
        result: message.split('\n')[0]?.slice(0, 160) ?? 'failed',
        goal: '—',
        met: false,
        how: 'The run failed; see the message.',
      });
    }
  }
} finally {
  await cleanup();
  clearTimeout(watchdog);
}
// Stopped by a signal or the watchdog: a partial table is not a result.
if (state.stopping) process.exit(130);

const wallSeconds = (performance.now() - startedAt) / 1000;
const redis = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown';
const stealAtEnd = stealMs();
const steal = stealAtStart === undefined || stealAtEnd === undefined ? 'n/a' : `${((stealAtEnd - stealAtStart) / 1000).toFixed(1)} s`;
const run = {
  date,
  machine: machine(),
  postgres: stores.postgresVersion,
  redis,
  command,
  wallSeconds,
  load: `${loadAtStart} at start, ${loadAverage()} at the end`,
  steal,
};
const content = section(rows, run);
process.stdout.write(
  `\n${table(rows)}\n\n${content
    .split('\n')
    .filter((l) => l.startsWith('- '))
    .join('\n')}\n`,
);
if (write) log(`wrote ${path.relative(ROOT, writePerformanceDoc(content))}`);
else log('docs/PERFORMANCE.md not written (partial or quick run; --write forces it)');
log(`done in ${wallSeconds.toFixed(0)} s${values.keep || values.profile || failed ? `; logs in ${path.relative(ROOT, runDir)}` : ''}`);
process.exit(failed ? 1 : 0);
