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
  const users = h.quick ? 10 : 40;
  const warmup = 40;
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
    for (let i = 0; i < warmup; i++) {
      await sample(viaService, service.name);
      await sample(viaProxy, proxy.name);
    }
    const s: number[] = [];
    const p: number[] = [];
    const cpu0 = [cpuMs(service.pid), cpuMs(proxy.pid)];
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
      goal: 'p50 ≤ +3 ms',
      met: added50 <= 3,
      how:
        `${n} streams through each side, one at a time, alternating service and bare proxy (after ${warmup} warm-up pairs); ` +
        `${users} pro-tier users take turns (the 30 starts per 60 s limit). Time = first chunk holding a delta at the client − ` +
        'request sent, over a kept-alive connection; the fake answers at once with 2 chunks. The service side includes ' +
        'authentication, the Redis rate limit and lease, the key decryption, the billing reservation and storing the user ' +
        'message in PostgreSQL before the provider is called.',
      notes: [
        `service mean ${ms(sd.mean)} ms, max ${ms(sd.max)} ms; bare proxy mean ${ms(pd.mean)} ms, max ${ms(pd.max)} ms; ` +
          `server CPU per whole stream: service ${ms(cpuPerStream[0] ?? NaN)} ms, bare proxy ${ms(cpuPerStream[1] ?? NaN)} ms`,
      ],
    };
  } finally {
    serviceAgent.destroy();
    proxyAgent.destroy();
    await Promise.all([service.stop(), proxy.stop()]);
  }
}
