// Row 1: deltas relayed per second, service vs bare proxy, same fake upstream, alternating rounds.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Harness } from '../lib/harness.ts';
import { cpuMs, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import type { OpenStream, StreamResult } from '../lib/sse-client.ts';
import { int, median } from '../lib/stats.ts';
import { proxyStream, serviceStream, userIds } from './targets.ts';

interface Round {
  readonly rate: number;
  readonly cpuUsPerDelta: number;
}

export async function relay(h: Harness): Promise<Row> {
  const streams = h.quick ? 20 : 50;
  const chunks = h.quick ? 500 : 2000;
  const rounds = h.quick ? 2 : 5;
  await h.script({ chunks: Array.from({ length: chunks }, (_, i) => (i % 2 === 0 ? ' token' : ' text')), delayMs: 0 });
  const service = await h.startService('service-relay');
  const proxy = await h.startProxy('proxy-relay');
  const agent = new http.Agent({ keepAlive: true, maxSockets: streams });
  try {
    const tokens = await Promise.all(userIds('relay', streams).map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    const runService = (): Promise<Round> => round(service, chunks, () => tokens.map((t) => serviceStream(service.ready, t, agent)));
    const runProxy = (): Promise<Round> => round(proxy, chunks, () => tokens.map(() => proxyStream(proxy.ready, agent)));
    // Warm-up: JIT, connection pools, the users' first sight.
    await runService();
    await runProxy();
    const s: Round[] = [];
    const p: Round[] = [];
    const ratios: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const a = await runService();
      const b = await runProxy();
      s.push(a);
      p.push(b);
      ratios.push(a.rate / b.rate);
    }
    // Each round is compared with the proxy round right after it, so load that comes and goes on the
    // machine falls on both sides of a pair; the median pair is the result.
    const ratio = median(ratios);
    const sCpu = median(s.map((r) => r.cpuUsPerDelta));
    const pCpu = median(p.map((r) => r.cpuUsPerDelta));
    return {
      id: 'relay',
      title: 'Stream relay throughput',
      service: `${int(median(s.map((r) => r.rate)))} deltas/s · ${sCpu.toFixed(1)} µs CPU/delta`,
      baseline: `${int(median(p.map((r) => r.rate)))} deltas/s · ${pCpu.toFixed(1)} µs CPU/delta (bare proxy)`,
      result: `${ratio.toFixed(2)}× the rate, ${(sCpu / pCpu).toFixed(1)}× the CPU`,
      goal: 'rate ≥ 0.8×',
      met: ratio >= 0.8,
      how:
        `${streams} concurrent streams × ${chunks} chunks each, no delay, through the service's stream route and through a bare ` +
        '`node:http` + `undici` pass-through proxy (bench/lib/bare-proxy.ts) to the same fake upstream process; a warm-up round of ' +
        `each, then ${rounds} pairs of rounds (service, then proxy). Rate = deltas received by the client (every stream checked ` +
        `complete with all ${chunks}) / wall time from the first request to the last stream's end; the result is the median of ` +
        'the per-pair ratios, the rates shown are medians. CPU per delta = user + system time of the server process (from ' +
        '/proc/<pid>/stat) over the round / deltas. Each user (one per stream, pro tier) saved its key through the API.',
      notes: [`rounds, deltas/s: service ${s.map((r) => int(r.rate)).join(', ')}; bare proxy ${p.map((r) => int(r.rate)).join(', ')}`],
    };
  } finally {
    agent.destroy();
    await Promise.all([service.stop(), proxy.stop()]);
  }
}

async function round(target: Proc, chunks: number, open: () => OpenStream[]): Promise<Round> {
  const cpuBefore = cpuMs(target.pid);
  const started = performance.now();
  const results = await Promise.all(open().map((s) => s.result));
  const wall = performance.now() - started;
  const cpu = cpuMs(target.pid) - cpuBefore;
  checkAll(results, chunks, target.name);
  const deltas = results.reduce((a, r) => a + r.deltas, 0);
  return { rate: (deltas * 1000) / wall, cpuUsPerDelta: (cpu * 1000) / deltas };
}

export function checkAll(results: readonly StreamResult[], chunks: number, name: string): void {
  const bad = results.filter((r) => !r.complete || r.deltas !== chunks);
  if (bad.length > 0) {
    const r = bad[0];
    const ending = JSON.stringify(r?.tail.slice(-160) ?? '');
    throw new Error(
      `${name}: ${bad.length} of ${results.length} streams incomplete (e.g. status ${r?.status}, ${r?.deltas} deltas, ${r?.error ?? 'no end marker'}; body ended ${ending})`,
    );
  }
}
