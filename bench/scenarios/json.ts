// Row 5: an authenticated JSON GET of the service vs a bare Fastify route with the same body.
import type { Harness } from '../lib/harness.ts';
import { HttpLoad } from '../lib/http-load.ts';
import { cpuMs, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { distribution, int, ms, type Distribution } from '../lib/stats.ts';
import { userIds } from './targets.ts';

const CONNECTIONS = 50;

interface Result {
  readonly rps: number;
  readonly latency: Distribution;
  readonly cpuUsPerRequest: number;
  readonly clientCpuShare: number;
}

export async function json(h: Harness): Promise<Row> {
  const durationMs = h.quick ? 3000 : 10_000;
  const service = await h.startService('service-json');
  const bare = await h.procs.startNode('bare-fastify', 'bench/lib/bare-fastify.ts', { env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' } });
  try {
    const tokens = await Promise.all(userIds('json', CONNECTIONS).map((u) => h.token(u)));
    const expected = await (await fetch(`${bare.ready}/packs`)).text();
    const s = await blast(service, '/api/billing/packs', (w) => ({ authorization: `Bearer ${tokens[w] ?? ''}` }), expected, durationMs);
    const b = await blast(bare, '/packs', () => ({}), expected, durationMs);
    const ratio = s.rps / b.rps;
    const show = (r: Result): string =>
      `${int(r.rps)} req/s · ${r.cpuUsPerRequest.toFixed(0)} µs CPU/req (p50 ${ms(r.latency.p50)} ms, p99 ${ms(r.latency.p99)} ms)`;
    return {
      id: 'json',
      title: 'JSON endpoint throughput',
      service: show(s),
      baseline: `${show(b)} (bare Fastify)`,
      result: `${ratio.toFixed(2)}× the rate, ${(s.cpuUsPerRequest / b.cpuUsPerRequest).toFixed(1)}× the CPU`,
      goal: '—',
      met: undefined,
      how:
        `GET /api/billing/packs (a bearer token per connection, one of ${CONNECTIONS} users, checked on every request — the ` +
        'service remembers a verified token for up to 60 s —, hooks, request logs at the production default level `info`, ' +
        'metrics; no database once the user is known) against a bare Fastify process ' +
        `answering the same body with a response schema. ${CONNECTIONS} keep-alive connections, closed loop (undici Pool, one ` +
        `request in flight per connection), ${durationMs / 1000} s each after a 2 s warm-up; bodies checked equal. The load ` +
        'generator and whatever else runs on the machine share its cores, so the server CPU per request (user + system time ' +
        'from /proc/<pid>/stat over the run / requests) is the steadier comparison.',
      notes: [`load generator busy ${(s.clientCpuShare * 100).toFixed(0)}% (service run) / ${(b.clientCpuShare * 100).toFixed(0)}% (bare run) of one core`],
    };
  } finally {
    await Promise.all([service.stop(), bare.stop()]);
  }
}

async function blast(target: Proc, path: string, headers: (worker: number) => Record<string, string>, expected: string, durationMs: number): Promise<Result> {
  const load = new HttpLoad(target.ready, CONNECTIONS);
  try {
    const first = await load.get(path, headers(0), true);
    if (first.status !== 200 || first.body !== expected) throw new Error(`${target.name} answered ${first.status}: ${first.body.slice(0, 200)}`);
    let bad = '';
    const samples: number[] = [];
    const once = async (w: number, record: boolean): Promise<void> => {
      const r = await load.get(path, headers(w));
      if (r.status !== 200) bad ||= `${r.status} ${r.body.slice(0, 200)}`;
      if (record) samples.push(r.ms);
    };
    await load.run(CONNECTIONS, 2000, (w) => once(w, false));
    const cpu0 = cpuMs(target.pid);
    const client0 = process.cpuUsage();
    const { wallMs } = await load.run(CONNECTIONS, durationMs, (w) => once(w, true));
    const client = process.cpuUsage(client0);
    const cpu = cpuMs(target.pid) - cpu0;
    if (bad) throw new Error(`${target.name}: ${bad}`);
    return {
      rps: (samples.length * 1000) / wallMs,
      latency: distribution(samples),
      cpuUsPerRequest: (cpu * 1000) / samples.length,
      clientCpuShare: (client.user + client.system) / 1000 / wallMs,
    };
  } finally {
    await load.close();
  }
}
