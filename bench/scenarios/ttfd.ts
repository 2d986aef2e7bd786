// Row 2: time to first delta at the client, service minus bare proxy; sequential, interleaved.
import type { Harness } from '../lib/harness.ts';
import { streamAgent } from '../lib/harness.ts';
import { cpuMs } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import type { OpenStream } from '../lib/sse-client.ts';
import { distribution, ms, type Distribution } from '../lib/stats.ts';
import { checkAll } from './relay.ts';
import { proxyStream, serviceStream, userIds } from './targets.ts';

export async function ttfd(h: Harness): Promise<Row> {
  const n = h.quick ? 100 : 400;
  // Warm-up until the JIT has optimised the per-stream code of both sides: a deployed instance has
  // served thousands of streams before this one. With 40 warm-up pairs the service still ran much
  // of a stream start as bytecode (about 5 ms of CPU per stream instead of about 3.5 ms).
  const warmup = h.quick ? 200 : 2000;
  // Users take turns, so each starts at most 25 streams in all: under the limit of 30 per 60 s.
  const users = Math.ceil((warmup + n) / 25);
  await h.script({ chunks: ['Hello', ' world'], delayMs: 0 });
  const service = await h.startService('service-ttfd');
  const proxy = await h.startProxy('proxy-ttfd');
  const serviceAgent = streamAgent(1);
  const proxyAgent = streamAgent(1);
  try {
    const tokens = await Promise.all(userIds('ttfd', users).map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    let next = 0;
    const viaService = (): OpenStream => serviceStream(service.ready, tokens[next++ % tokens.length] ?? '', serviceAgent);
    const viaProxy = (): OpenStream => proxyStream(proxy.ready, proxyAgent);
    const sample = async (open: () => OpenStream, name: string): Promise<number> => {
      const r = await open().result;
      checkAll([r], 2, name);
      if (r.firstDeltaAt === undefined) throw new Error(`${name}: no delta`);
      return r.firstDeltaAt - r.startedAt;
    };
    // The last quarter of the warm-up is timed, to show the service's CPU per stream had settled.
    const lastQuarterFrom = Math.floor((3 * warmup) / 4);
    let lastWarm = [0, 0];
    for (let i = 0; i < warmup; i++) {
      if (i === lastQuarterFrom) lastWarm = [cpuMs(service.pid), cpuMs(proxy.pid)];
      await sample(viaService, service.name);
      await sample(viaProxy, proxy.name);
    }
    const cpu0 = [cpuMs(service.pid), cpuMs(proxy.pid)];
    const warmCpu = [(cpu0[0] ?? 0) - (lastWarm[0] ?? 0), (cpu0[1] ?? 0) - (lastWarm[1] ?? 0)].map((c) => c / (warmup - lastQuarterFrom));
    const s: number[] = [];
    const p: number[] = [];
    for (let i = 0; i < n; i++) {
      // Alternating, so drift (GC, the OS, the database's checkpointer) falls on both sides alike.
      s.push(await sample(viaService, service.name));
      p.push(await sample(viaProxy, proxy.name));
    }
    const cpuPerStream = [cpuMs(service.pid) - (cpu0[0] ?? 0), cpuMs(proxy.pid) - (cpu0[1] ?? 0)].map((c) => c / n);
    const sd = distribution(s);
    const pd = distribution(p);
    const added50 = sd.p50 - pd.p50;
    const added99 = sd.p99 - pd.p99;
    const show = (d: Distribution): string => `p50 ${ms(d.p50)} ms, p99 ${ms(d.p99)} ms`;
    return {
      id: 'ttfd',
      title: 'Added time to first delta',
      service: show(sd),
      baseline: `${show(pd)} (bare proxy)`,
      result: `+${ms(added50)} ms p50, +${ms(added99)} ms p99`,
      goal: 'p50 ≤ +1.5 ms',
      met: added50 <= 1.5,
      how:
        `${n} streams through each side, one at a time, alternating service and bare proxy (after ${warmup} warm-up pairs, so that both run the code the JIT optimised, as a deployed instance does); ` +
        `${users} pro-tier users take turns (each starts at most 25 streams, under the 30 per 60 s limit). Time = first chunk holding a delta at the client − ` +
        'request sent, over a kept-alive connection; the fake answers at once with 2 chunks. The service side includes ' +
        'authentication, the Redis rate limit and lease, the key decryption, the billing reservation and storing the user ' +
        'message in PostgreSQL before the provider is called.',
      notes: [
        `service mean ${ms(sd.mean)} ms, max ${ms(sd.max)} ms; bare proxy mean ${ms(pd.mean)} ms, max ${ms(pd.max)} ms; ` +
          `server CPU per whole stream: service ${ms(cpuPerStream[0] ?? NaN)} ms, bare proxy ${ms(cpuPerStream[1] ?? NaN)} ms ` +
          `(last quarter of the warm-up: ${ms(warmCpu[0] ?? NaN)} ms and ${ms(warmCpu[1] ?? NaN)} ms)`,
      ],
    };
  } finally {
    serviceAgent.destroy();
    proxyAgent.destroy();
    await Promise.all([service.stop(), proxy.stop()]);
  }
}
