// Row: a turn with one tool round. The service's time for a turn whose model calls get_quote once
// and then answers, against the same two upstream rounds sent one after the other through the bare
// proxy; its added time set against the added time of a plain single-round turn, in the same run.
import { randomUUID } from 'node:crypto';
import type { StreamScript } from '../../test/fakes/index.ts';
import type { Harness } from '../lib/harness.ts';
import { streamAgent } from '../lib/harness.ts';
import type { Row } from '../lib/report.ts';
import { DEFAULT_MODEL, saveKeysViaApi } from '../lib/seed.ts';
import { OPENAI_MARKERS, openStream, type OpenStream, type StreamResult } from '../lib/sse-client.ts';
import { distribution, ms } from '../lib/stats.ts';
import { checkAll } from './relay.ts';
import { QUESTION, proxyStream, serviceStream, userIds } from './targets.ts';

const MARKET_KEY = 'pk-valid-polygon';
const CALL_ID = 'call_bench0000000000000001';
const TOOL_ROUND: StreamScript = { toolCalls: [{ id: CALL_ID, name: 'get_quote', arguments: { symbol: 'AAPL' }, fragments: 3 }], delayMs: 0 };
const TEXT_ROUND: StreamScript = { chunks: ['Hello', ' world'], delayMs: 0 };

/** The proxy's second round: the question, the model's call and a quote-sized result, as the service sends them. */
const secondRoundBody = JSON.stringify({
  model: DEFAULT_MODEL,
  messages: [
    { role: 'user', content: QUESTION },
    { role: 'assistant', content: null, tool_calls: [{ id: CALL_ID, type: 'function', function: { name: 'get_quote', arguments: '{"symbol":"AAPL"}' } }] },
    {
      role: 'tool',
      tool_call_id: CALL_ID,
      content: JSON.stringify({
        symbol: 'AAPL',
        price: 232.8,
        change: 0.98,
        changePercent: 0.42,
        open: 231.39,
        high: 233.25,
        low: 230.63,
        volume: 44489128,
        previousClose: 231.82,
        asOf: new Date().toISOString(),
      }),
    },
  ],
  stream: true,
  stream_options: { include_usage: true },
});

export async function tools(h: Harness): Promise<Row> {
  const n = h.quick ? 100 : 300;
  const warmup = h.quick ? 100 : 600;
  // Two turns per user per iteration; at most 24 turns per user in all (the limit is 30 per 60 s).
  const users = Math.ceil(((warmup + n) * 2) / 24);
  await h.script(TEXT_ROUND);
  const market = await h.procs.startNode('fake-market', 'bench/lib/fake-market.ts', { env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' } });
  const service = await h.startService('service-tools', { MARKET_DATA_PROVIDER: 'polygon', MARKET_DATA_BASE_URL: market.ready });
  const proxy = await h.startProxy('proxy-tools');
  const serviceAgent = streamAgent(1);
  const proxyAgent = streamAgent(1);
  try {
    const tokens = await Promise.all(userIds('tools', users).map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    for (const token of tokens) {
      const res = await fetch(`${service.ready}/api/advisor/market-data-key`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ apiKey: MARKET_KEY }),
      });
      const text = await res.text();
      if (res.status !== 200 || !text.includes('"verified":true')) throw new Error(`market-data key save answered ${res.status}: ${text}`);
    }
    let next = 0;
    const token = (): string => tokens[next++ % tokens.length] ?? '';
    const took = (r: StreamResult): number => r.endedAt - r.startedAt;
    const one = async (open: () => OpenStream, name: string, deltas: number): Promise<number> => {
      const r = await open().result;
      checkAll([r], deltas, name);
      return took(r);
    };
    const marketUrl = new URL('/v2/snapshot/locale/us/markets/stocks/tickers/AAPL', market.ready);
    const sample = async (): Promise<[number, number, number, number, number]> => {
      const s1 = await one(() => serviceStream(service.ready, token(), serviceAgent), service.name, 2);
      const p1 = await one(() => proxyStream(proxy.ready, proxyAgent), proxy.name, 2);
      await h.enqueue([TOOL_ROUND, TEXT_ROUND]);
      const s2 = await one(() => serviceStream(service.ready, token(), serviceAgent), `${service.name} (tool turn)`, 2);
      await h.enqueue([TOOL_ROUND, TEXT_ROUND]);
      const p2a = await one(() => proxyStream(proxy.ready, proxyAgent), `${proxy.name} (round 1)`, 0);
      const p2b = await one(
        () => openStream({ url: new URL('/', proxy.ready), headers: {}, body: secondRoundBody, agent: proxyAgent, markers: OPENAI_MARKERS, timeoutMs: 60_000 }),
        `${proxy.name} (round 2)`,
        2,
      );
      // What the tool's own read costs: the same snapshot asked of the fake directly.
      const t0 = performance.now();
      const res = await fetch(marketUrl, { headers: { authorization: `Bearer ${MARKET_KEY}`, 'x-bench': randomUUID() } });
      await res.arrayBuffer();
      const tool = performance.now() - t0;
      return [s1, p1, s2, p2a + p2b, tool];
    };
    for (let i = 0; i < warmup; i++) await sample();
    const cols: number[][] = [[], [], [], [], []];
    for (let i = 0; i < n; i++) (await sample()).forEach((v, c) => cols[c]?.push(v));
    const [s1, p1, s2, p2, tool] = cols.map((c) => distribution(c));
    if (!s1 || !p1 || !s2 || !p2 || !tool) throw new Error('no samples');
    const addedSingle = s1.p50 - p1.p50;
    const addedTool = s2.p50 - p2.p50 - tool.p50;
    const ratio = addedTool / addedSingle;
    return {
      id: 'tools',
      title: 'Turn with one tool round',
      service: `tool turn p50 ${ms(s2.p50)} ms; single-round turn p50 ${ms(s1.p50)} ms`,
      baseline: `two rounds p50 ${ms(p2.p50)} ms; one round p50 ${ms(p1.p50)} ms (bare proxy)`,
      result: `added ${ms(addedTool)} ms vs ${ms(addedSingle)} ms: ${ratio.toFixed(2)}× the single-round figure`,
      goal: '≤ 2× the single-round added time',
      met: ratio <= 2,
      how:
        `${n} iterations after ${warmup} warm-up ones, one request at a time; each iteration runs, in turn, a single-round service turn, the same round through the bare proxy, ` +
        'a service turn whose model calls get_quote once (streamed in 3 argument fragments) and then answers, and the same two rounds through the bare proxy (the second carrying the call and a quote-sized result). ' +
        'Time = request sent → end of the response. Added time = service p50 − bare proxy p50; for the tool turn, less the p50 of the tool’s own read (the same snapshot asked of the Polygon fake directly, ' +
        `${ms(tool.p50)} ms): the fake market data answers at once, so what remains is the service’s own work for the extra round.`,
      notes: [`tool turn p99 ${ms(s2.p99)} ms vs two proxy rounds p99 ${ms(p2.p99)} ms; single p99 ${ms(s1.p99)} ms vs ${ms(p1.p99)} ms`],
    };
  } finally {
    serviceAgent.destroy();
    proxyAgent.destroy();
    await Promise.all([service.stop(), proxy.stop(), market.stop()]);
  }
}
