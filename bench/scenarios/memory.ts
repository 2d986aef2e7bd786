// Row 3: resident memory per open stream, service vs bare proxy, each a fresh process.
import http from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { Harness } from '../lib/harness.ts';
import { sampleRss, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { seedKeysDirect } from '../lib/seed.ts';
import { openAll, type OpenStream } from '../lib/sse-client.ts';
import { int } from '../lib/stats.ts';
import { proxyStream, serviceStream, userIds } from './targets.ts';

/** Streams being started at once (not yet at their first delta). */
export const STARTING = 200;
/** From the last stream's first delta (or the warm-up's end) to the RSS samples. */
export const SETTLE_MS = 3000;

interface Measure {
  readonly restBytes: number;
  readonly openBytes: number;
  readonly perStream: number;
  readonly openMs: number;
}

export async function memory(h: Harness): Promise<Row> {
  const n = h.quick ? 1000 : 5000;
  const warm = 200;
  const users = userIds('mem', n);
  const warmUsers = userIds('memw', warm);
  // One chunk, then silence with the connection open: the stream stays live until the client leaves.
  await h.script({ chunks: ['Hello', ' world'], stallAfterChunks: 1 });

  const service = await h.startService('service-memory', { STREAM_IDLE_TIMEOUT_MS: '900000' });
  let s: Measure;
  try {
    await seedKeysDirect(h.stores.pool, [...users, ...warmUsers]);
    const [tokens, warmTokens] = await Promise.all([Promise.all(users.map((u) => h.token(u))), Promise.all(warmUsers.map((u) => h.token(u)))]);
    s = await measure(
      service,
      (i, agent) => serviceStream(service.ready, warmTokens[i] ?? '', agent),
      (i, agent) => serviceStream(service.ready, tokens[i] ?? '', agent),
      warm,
      n,
    );
  } finally {
    await service.stop();
  }
  const proxy = await h.startProxy('proxy-memory');
  let p: Measure;
  try {
    p = await measure(
      proxy,
      (_, agent) => proxyStream(proxy.ready, agent),
      (_, agent) => proxyStream(proxy.ready, agent),
      warm,
      n,
    );
  } finally {
    await proxy.stop();
  }
  const kb = (b: number): string => `${(b / 1024).toFixed(1)} KB`;
  const mb = (b: number): string => `${(b / 2 ** 20).toFixed(0)} MB`;
  return {
    id: 'memory',
    title: 'Memory per open stream',
    service: `${kb(s.perStream)} per stream`,
    baseline: `${kb(p.perStream)} per stream (bare proxy)`,
    result: `${(s.perStream / p.perStream).toFixed(1)}× the proxy`,
    goal: '≤ 64 KB',
    met: s.perStream <= 64 * 1024,
    how:
      `${int(n)} concurrent open streams, one user each (pro tier, key rows written with the service's own vault and row layout ` +
      'in one insert: bench/lib/seed.ts), the fake sending one chunk and then nothing (`stallAfterChunks: 1`), ' +
      'STREAM_IDLE_TIMEOUT_MS=900000, default heartbeat. Per stream = (VmRSS with all open − VmRSS at rest) / streams, each ' +
      `the median of 5 samples ${SETTLE_MS / 1000} s after the last stream showed its first delta (at rest: after ${warm} ` +
      'warm-up streams were opened and closed). Same for the bare proxy, each side in a fresh process. Streams are started ' +
      `${STARTING} at a time.`,
    notes: [
      `service RSS ${mb(s.restBytes)} at rest → ${mb(s.openBytes)} open (opened in ${(s.openMs / 1000).toFixed(1)} s, ` +
        `${int((n * 1000) / s.openMs)} stream starts/s); bare proxy ${mb(p.restBytes)} → ${mb(p.openBytes)}`,
    ],
  };
}

async function measure(
  target: Proc,
  openWarm: (i: number, agent: http.Agent) => OpenStream,
  open: (i: number, agent: http.Agent) => OpenStream,
  warm: number,
  n: number,
): Promise<Measure> {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const live: OpenStream[] = [];
  try {
    const warmStreams = await openAll(warm, (i) => openWarm(i, agent), target.name, STARTING);
    for (const w of warmStreams) w.abort();
    await Promise.all(warmStreams.map((w) => w.result));
    await delay(SETTLE_MS);
    const restBytes = await sampleRss(target.pid);
    const t0 = performance.now();
    live.push(...(await openAll(n, (i) => open(i, agent), target.name, STARTING)));
    const openMs = performance.now() - t0;
    await delay(SETTLE_MS);
    const openBytes = await sampleRss(target.pid);
    return { restBytes, openBytes, perStream: (openBytes - restBytes) / n, openMs };
  } finally {
    for (const l of live) l.abort();
    await Promise.all(live.map((l) => l.result));
    agent.destroy();
  }
}
