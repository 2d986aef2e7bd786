// Issue 30 ("Past one machine"): 10,000 concurrent open advisor streams on one instance — the memory
// they hold, whether every one still gets its heartbeat on time, how a streaming turn beside them
// fares, and what an instance spends per second keeping them (the figures a capacity model needs).
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type pg from 'pg';
import type { Harness } from '../lib/harness.ts';
import { ask, cpuMs, pidsCpuMs, sampleRss, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { seedKeysDirect } from '../lib/seed.ts';
import { commandCalls, commandsBetween, commitsSoFar } from '../lib/sockets.ts';
import { MarkerCounter, openAll, SERVICE_MARKERS } from '../lib/sse-client.ts';
import { distribution, int, ms, type Distribution } from '../lib/stats.ts';
import type { StreamsRequest, WindowReport } from './scale-streams.ts';
import { SETTLE_MS, STARTING } from './memory.ts';
import { serviceStream, userIds } from './targets.ts';

/** The service's default STREAM_HEARTBEAT_MS, set explicitly so the bench knows it. */
const HEARTBEAT_MS = 15_000;
/** A gap between two heartbeats longer than this many intervals is late. */
const LATE = 1.5;
/** The probe: a turn streaming steadily, its deltas timed as received. */
const PROBE = { deltas: 200, delayMs: 20, runs: 3 };
/** Descriptors a process holds besides its streams' (pools, logs, pipes, the event loop's), with room to spare. */
const FD_MARGIN = 300;
/** How long the closed streams' turns may take to be stored and settled. */
const SETTLED_WITHIN_MS = 120_000;

/** Pauses of the service's event loop (its own /metrics: prom-client's default metrics) and of the bench's, over some work. */
interface Pauses {
  readonly serviceLagMaxMs: number;
  readonly serviceLagP99Ms: number;
  /** Garbage collections over 100 ms, and the major collections' total time. */
  readonly gcOver100ms: number;
  readonly gcMajorMs: number;
  readonly benchLoopMaxMs: number;
}

interface Window {
  readonly ms: number;
  readonly report: WindowReport;
  readonly pauses: Pauses;
  /** CPU ms per second of wall time, by process. */
  readonly cpuPerSecond: ReadonlyMap<string, number>;
  readonly redisPerSecond: number;
  readonly redisCommands: ReadonlyMap<string, number>;
  readonly commitsPerSecond: number;
}

export async function scale(h: Harness): Promise<Row> {
  const asked = Number(process.env.BENCH_SCALE_STREAMS ?? 0);
  const n = asked > 0 ? Math.floor(asked) : h.quick ? 1000 : 10_000;
  const beats = h.quick ? 2 : 4;
  const warm = 200;
  // The warm-up streams are closed before the others open: at most n + 1 (the probe) are open at once.
  checkOpenFiles(n + 1);
  const users = userIds('scale', n);
  const warmUsers = userIds('scalew', warm);
  const [probeUser = 'scalep-0'] = userIds('scalep', 1);
  const everyone = [...users, ...warmUsers, probeUser];
  // One chunk, then silence with the connection open: the stream stays live until the client leaves.
  await h.script({ chunks: ['Hello', ' world'], stallAfterChunks: 1 });
  // No detach grace: a stream the bench closes ends its turn at once (the rest carries no detached turns).
  const service = await h.startService('service-scale', {
    STREAM_IDLE_TIMEOUT_MS: '900000',
    STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS),
    STREAM_DETACH_GRACE_MS: '0',
  });
  // The idle streams' client: a process of its own, so that reading them never delays the probe's client (this one).
  const streams = await h.procs.startNode('scale-streams', 'bench/scenarios/scale-streams.ts', {
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
    ipc: true,
    ready: /(scale streams ready)/,
  });
  const tell = <T extends object = object>(m: StreamsRequest): Promise<T> => ask<T>(streams, m);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const redis = new Redis(h.stores.redisUrl, { lazyConnect: true });
  try {
    await seedKeysDirect(h.stores.pool, everyone);
    const [tokens, warmTokens, probeToken] = await Promise.all([
      Promise.all(users.map((u) => h.token(u))),
      Promise.all(warmUsers.map((u) => h.token(u))),
      h.token(probeUser),
    ]);
    await redis.connect();
    const warmStreams = await openAll(warm, (i) => serviceStream(service.ready, warmTokens[i] ?? '', agent), service.name, STARTING);
    for (const w of warmStreams) w.abort();
    await Promise.all(warmStreams.map((w) => w.result));
    const alone = await pausesDuring(service.ready, () => probe(h, service.ready, probeToken, agent));

    await delay(SETTLE_MS);
    const restCpu0 = cpuMs(service.pid);
    const restT0 = performance.now();
    const restBytes = await sampleRss(service.pid);
    await delay(SETTLE_MS);
    const restCpuPerSecond = ((cpuMs(service.pid) - restCpu0) * 1000) / (performance.now() - restT0);
    const restFds = openFds(service.pid);

    const opened = await tell<{ openMs?: number; error?: string }>({ open: { url: service.ready, tokens, starting: STARTING } });
    if (opened.error !== undefined || opened.openMs === undefined) throw new Error(opened.error ?? 'the streams did not open');
    const openMs = opened.openMs;
    await delay(SETTLE_MS);
    const openBytes = await sampleRss(service.pid);
    const openFdCount = openFds(service.pid);
    const perStream = (openBytes - restBytes) / n;

    const window = await idleWindow(h, service, streams, redis, beats * HEARTBEAT_MS);
    const loaded = await pausesDuring(service.ready, () => probe(h, service.ready, probeToken, agent));
    const closedAt = performance.now();
    await tell({ close: true });
    const settledMs = await settled(h.stores.pool, everyone, closedAt);

    const { report } = window;
    const lateMs = LATE * HEARTBEAT_MS;
    const gaps = distribution(report.gaps);
    const late = report.gaps.filter((g) => g > lateMs).length + report.lateOpen;
    const judged = report.gaps.length + report.lateOpen;
    const a = distribution(alone.result);
    const b = distribution(loaded.result);
    const ratio = b.p99 / a.p99;
    const met = report.ended === 0 && report.silent === 0 && late === 0 && ratio <= 2 && settledMs !== undefined;
    const kb = (x: number): string => `${(x / 1024).toFixed(1)} KB`;
    const mb = (x: number): string => `${(x / 2 ** 20).toFixed(0)} MB`;
    const s = (x: number): string => (x / 1000).toFixed(2);
    const gapsMs = (d: Distribution): string => `p50 ${ms(d.p50)} ms, p99 ${ms(d.p99)} ms, max ${ms(d.max)} ms`;
    const paused = (p: Pauses): string =>
      `service event-loop delay max ${ms(p.serviceLagMaxMs, 0)} ms (p99 ${ms(p.serviceLagP99Ms, 0)} ms), ${p.gcOver100ms} GC pauses over 100 ms, ` +
      `major GC ${ms(p.gcMajorMs, 0)} ms in all; the probe client's event-loop delay max ${ms(p.benchLoopMaxMs, 0)} ms`;
    const serviceCpu = window.cpuPerSecond.get('service') ?? NaN;
    const idleCpu = serviceCpu - restCpuPerSecond;
    const commands = [...window.redisCommands]
      .sort((x, y) => y[1] - x[1])
      .map(([name, calls]) => `${name} ${((calls * 1000) / window.ms).toFixed(1)}`)
      .join(', ');
    const cpuLine = [...window.cpuPerSecond].map(([name, x]) => `${name} ${x.toFixed(1)}`).join(', ');
    return {
      id: 'scale',
      title: 'Open streams on one instance',
      service:
        `${int(n)} open streams: ${kb(perStream)} per stream · heartbeat gaps p50 ${s(gaps.p50)} s, p99 ${s(gaps.p99)} s, max ${s(gaps.max)} s ` +
        `(${((late / Math.max(1, judged)) * 100).toFixed(2)}% late) · probe gaps ${gapsMs(b)}`,
      baseline: `the probe alone on the same instance: gaps ${gapsMs(a)}`,
      result:
        `probe p99 ${ratio.toFixed(2)}× alone; ${int(late)} of ${int(judged)} heartbeat gaps over ${LATE}× the ${HEARTBEAT_MS / 1000} s ` +
        `interval, ${int(report.silent)} streams without one, ${int(report.ended)} ended early; closed streams stored and settled ` +
        `${settledMs === undefined ? `NOT within ${SETTLED_WITHIN_MS / 1000} s` : `within ${s(settledMs)} s`}; idle streams cost ` +
        `${idleCpu.toFixed(1)} ms service CPU per second`,
      goal: `all ${int(n)} open throughout; no heartbeat gap over ${LATE}× the interval; probe p99 gap ≤ 2× alone; every closed stream settled`,
      met,
      how:
        `One service process (Redis + PostgreSQL), STREAM_HEARTBEAT_MS=${HEARTBEAT_MS} (the default), STREAM_IDLE_TIMEOUT_MS=900000, ` +
        `STREAM_DETACH_GRACE_MS=0 (a stream the bench closes ends its turn at once). ${int(n)} users (pro tier, key rows written with the ` +
        `service's own vault in one insert: bench/lib/seed.ts) each open one advisor stream (a new conversation), ${STARTING} being started at ` +
        'a time; the fake sends one chunk and then nothing with the connection open (`stallAfterChunks: 1`), so every stream stays live. ' +
        'Their client is a process of its own (bench/scenarios/scale-streams.ts: one http.Agent without keep-alive or socket cap; it counts ' +
        "markers per chunk and keeps no body), apart from the probe's (the bench process). Memory per stream = (VmRSS with all open − VmRSS " +
        `at rest) / streams, each the median of 5 samples ${SETTLE_MS / 1000} s after the last stream showed its first delta (at rest: after ` +
        `${warm} warm-up streams were opened and closed). Heartbeats: over a window of ${beats} intervals (${(beats * HEARTBEAT_MS) / 1000} s) ` +
        'once all are open, the arrival of every `: ping` comment on every stream; a gap is the time between two consecutive ones on a ' +
        `stream; late = a gap over ${LATE}× the interval, or a stream whose last heartbeat was more than that before the window's end. CPU ` +
        "per second = user + system time (/proc/<pid>/stat) over the window / its wall time, for the service, PostgreSQL's client backends, " +
        "redis-server, the fake and both client processes; idle streams' cost = the service's figure minus its own at rest (over " +
        `${(SETTLE_MS + 2500) / 1000} s before the streams opened). Store requests over the window: Redis commands (INFO commandstats) and PostgreSQL commits ` +
        `(pg_stat_database.xact_commit). The probe: one more user's turn whose reply is ${PROBE.deltas} deltas sent ${PROBE.delayMs} ms ` +
        `apart by the fake (its own script, h.enqueue), ${PROBE.runs} times after the window with every stream still open, and the same ` +
        'before any was opened (the baseline, same process); a gap is the time between two chunks holding deltas as received (deltas of ' +
        "one chunk: gap 0); the service's event-loop delay and GC pauses over each come from its /metrics. Then every stream is closed " +
        'at once and the database is polled until none of their replies is `streaming` and no charge `reserved`.',
      notes: [
        `capacity, one instance: ${int(perStream)} bytes of RSS per open stream (${mb(restBytes)} at rest → ${mb(openBytes)} with ${int(n)} ` +
          `open); ${((openFdCount - restFds) / n).toFixed(2)} file descriptors per open stream (the client's connection and the provider ` +
          `call's: ${int(restFds)} → ${int(openFdCount)}), so RLIMIT_NOFILE bounds an instance at about half of it; ${idleCpu.toFixed(1)} ms ` +
          `service CPU per second for ${int(n)} idle streams (${((idleCpu * 1000) / n).toFixed(2)} ms per second per 1,000; at rest ` +
          `${restCpuPerSecond.toFixed(1)} ms/s); per second PostgreSQL ${window.commitsPerSecond.toFixed(0)} commits, Redis ` +
          `${window.redisPerSecond.toFixed(0)} commands`,
        `over the ${(window.ms / 1000).toFixed(0)} s window, CPU ms per second: ${cpuLine}; Redis commands per second: ${commands || 'none'}; ` +
          `${paused(window.pauses)}; the streams' client's event-loop delay p99 ${ms(report.loopP99Ms)} ms, max ${ms(report.loopMaxMs)} ms`,
        `${int(n)} streams opened in ${(openMs / 1000).toFixed(1)} s (${int((n * 1000) / openMs)} starts/s); ${int(report.gaps.length)} ` +
          `heartbeat gaps, mean ${s(gaps.mean)} s; all closed at once: their turns stored and settled ` +
          `${settledMs === undefined ? 'NOT within the bound' : `${s(settledMs)} s later`}`,
        `probe alone: gaps ${gapsMs(a)}, mean ${ms(a.mean)} ms (${a.n} gaps); ${paused(alone.pauses)}`,
        `probe with the streams open: gaps ${gapsMs(b)}, mean ${ms(b.mean)} ms (${b.n} gaps); ${paused(loaded.pauses)}`,
      ],
    };
  } finally {
    redis.disconnect();
    agent.destroy();
    await streams.stop();
    await service.stop(60_000);
  }
}

/**
 * The service holds two descriptors per open stream (the client's connection and its provider call's),
 * the fake and the client one each; every process of the run has this process's limit.
 */
export function checkOpenFiles(streams: number, row = 'scale', what = "open streams (the probe's included)"): void {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  const soft = m?.[1] === 'unlimited' ? Infinity : Number(m?.[1] ?? NaN);
  const hard = m?.[2] ?? 'unknown';
  const need = 2 * streams + FD_MARGIN;
  if (!(soft >= need)) {
    const fits = Math.floor(((soft - FD_MARGIN) / 2 - 1) / 100) * 100;
    throw new Error(
      `${row}: ${int(streams)} ${what} need ${int(need)} open files in the service process (2 per stream: ` +
        `the client's connection and the provider call's), but this process may open ${int(soft)} (ulimit -n; hard limit ${hard}) and ` +
        `its children inherit that. Raise it before the run (ulimit -n ${need}, which may need root or limits.conf) or run fewer: ` +
        `BENCH_SCALE_STREAMS=${fits}.`,
    );
  }
}

function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** The window over which the idle streams' heartbeats and costs are read; nothing else runs meanwhile. */
async function idleWindow(h: Harness, service: Proc, streams: Proc, redis: Redis, windowMs: number): Promise<Window> {
  const backends = await h.stores.pool.query<{ pid: number }>(
    `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
  );
  const pids = new Map<string, readonly number[]>([
    ['service', [service.pid]],
    ['PostgreSQL backends', backends.rows.map((r) => r.pid)],
    ['Redis', [h.stores.redisPid]],
    ['fake upstream', [h.fake.pid]],
    ["streams' client", [streams.pid]],
  ]);
  const [commands0, commits0] = await Promise.all([commandCalls(redis), commitsSoFar(h.stores.pool)]);
  const cpu0 = new Map([...pids].map(([name, p]) => [name, pidsCpuMs(p)]));
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  const { result: report, pauses } = await pausesDuring(service.ready, async () => {
    await ask(streams, { window: 'open' } satisfies StreamsRequest);
    await delay(windowMs);
    return ask<WindowReport>(streams, { window: 'close', lateMs: LATE * HEARTBEAT_MS } satisfies StreamsRequest);
  });
  const wall = performance.now() - t0;
  const client = process.cpuUsage(client0);
  const cpuPerSecond = new Map([...pids].map(([name, p]) => [name, ((pidsCpuMs(p) - (cpu0.get(name) ?? 0)) * 1000) / wall]));
  cpuPerSecond.set('bench process', (client.user + client.system) / wall);
  // pg_stat_database lags up to a second behind the commits.
  await delay(1000);
  const [commands1, commits1] = await Promise.all([commandCalls(redis), commitsSoFar(h.stores.pool)]);
  const redisCommands = commandsBetween(commands0, commands1);
  let redisCalls = 0;
  for (const calls of redisCommands.values()) redisCalls += calls;
  return {
    ms: wall,
    report,
    pauses,
    cpuPerSecond,
    redisPerSecond: (redisCalls * 1000) / wall,
    redisCommands,
    // The bench's own reading is one commit.
    commitsPerSecond: ((commits1 - commits0 - 1) * 1000) / wall,
  };
}

/** PROBE.runs turns of the probe user, one at a time, each with its own script; the gaps between its deltas as received. */
async function probe(h: Harness, serviceUrl: string, token: string, agent: http.Agent): Promise<number[]> {
  const gaps: number[] = [];
  for (let run = 0; run < PROBE.runs; run++) {
    await h.enqueue([{ chunks: Array.from({ length: PROBE.deltas }, (_, i) => ` word${i}`), delayMs: PROBE.delayMs }]);
    const counter = new MarkerCounter(SERVICE_MARKERS.delta);
    const times: number[] = [];
    const r = await serviceStream(serviceUrl, token, agent, (chunk, at) => {
      for (let k = counter.push(chunk); k > 0; k--) times.push(at);
    }).result;
    if (r.status !== 200 || !r.complete || r.deltas !== PROBE.deltas) {
      throw new Error(`probe: status ${r.status}, ${r.deltas} deltas, ${r.error ?? (r.complete ? 'ended' : 'no end')}: ${r.tail.slice(-160)}`);
    }
    for (let i = 1; i < times.length; i++) gaps.push((times[i] ?? NaN) - (times[i - 1] ?? NaN));
  }
  return gaps;
}

/** `work`, and the pauses of the service's event loop (prom-client resets its figures at every scrape) and of this process's over it. */
async function pausesDuring<T>(serviceUrl: string, work: () => Promise<T>): Promise<{ result: T; pauses: Pauses }> {
  const before = await scrape(serviceUrl);
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const result = await work();
  loop.disable();
  const after = await scrape(serviceUrl);
  const between = (name: string): number => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  return {
    result,
    pauses: {
      serviceLagMaxMs: (after.get('nodejs_eventloop_lag_max_seconds') ?? NaN) * 1000,
      serviceLagP99Ms: (after.get('nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000,
      gcOver100ms: between('gc count') - between('gc le 0.1'),
      gcMajorMs: between('gc major seconds') * 1000,
      benchLoopMaxMs: loop.max / 1e6,
    },
  };
}

/** The figures of the service's /metrics that pausesDuring reads (GC histograms summed over their kinds). */
async function scrape(serviceUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(new URL('/metrics', serviceUrl))).text();
  const figures = new Map<string, number>();
  const add = (name: string, x: number): void => void figures.set(name, (figures.get(name) ?? 0) + x);
  for (const line of text.split('\n')) {
    const m = /^(\w+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m?.[1] || m[3] === undefined) continue;
    const [name, labels = '', value] = [m[1], m[2], Number(m[3])];
    if (name.startsWith('nodejs_eventloop_lag_')) figures.set(name, value);
    else if (name === 'nodejs_gc_duration_seconds_count') add('gc count', value);
    else if (name === 'nodejs_gc_duration_seconds_bucket' && labels.includes('le="0.1"')) add('gc le 0.1', value);
    else if (name === 'nodejs_gc_duration_seconds_sum' && labels.includes('kind="major"')) add('gc major seconds', value);
  }
  return figures;
}

/** Polls until no reply of `users` is streaming and no charge reserved: the time from `since`, or undefined past the bound. */
async function settled(pool: pg.Pool, users: readonly string[], since: number): Promise<number | undefined> {
  while (performance.now() - since < SETTLED_WITHIN_MS) {
    const left = await unsettled(pool, users);
    if (left.streaming + left.reserved === 0) return performance.now() - since;
    await delay(250);
  }
  return undefined;
}

/** The replies of `users` still `streaming` and their charges still `reserved`: their turns' ends not yet stored. */
export async function unsettled(pool: pg.Pool, users: readonly string[]): Promise<{ streaming: number; reserved: number }> {
  const r = await pool.query<{ streaming: number; reserved: number }>(
    `select (select count(*)::int from messages where user_id = any($1::text[]) and status = 'streaming') as streaming,
            (select count(*)::int from turn_charges where user_id = any($1::text[]) and status = 'reserved') as reserved`,
    [users],
  );
  return { streaming: r.rows[0]?.streaming ?? NaN, reserved: r.rows[0]?.reserved ?? NaN };
}
