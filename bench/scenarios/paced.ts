// Row "paced turns": turns at a provider's pace (40 deltas 25 ms apart), 40 at once: the service's
// CPU per delta against the bare proxy's per chunk, and what each turn sends Redis per streaming second
// — commands (INFO commandstats, a script's own commands included) and requests (round trips: what
// MONITOR shows a client sent, not the commands a script ran). Unfollowed turns (the usual case) and
// turns followed from a second instance are measured apart.
import http from 'node:http';
import { Redis } from 'ioredis';
import type { Harness } from '../lib/harness.ts';
import { streamAgent } from '../lib/harness.ts';
import { cpuMs } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import { commandCalls, commandsBetween } from '../lib/sockets.ts';
import { MarkerCounter, SERVICE_MARKERS, type StreamResult } from '../lib/sse-client.ts';
import { median } from '../lib/stats.ts';
import { checkAll } from './relay.ts';
import { proxyStream, serviceStream, userIds } from './targets.ts';

const TURNS = 40;
const DELTAS = 40;
const PACE_MS = 25;

interface Round {
  readonly cpuUsPerDelta: number;
  /** Client-side seconds from each request to its response's end, summed over the round's turns. */
  readonly streamingSeconds: number;
  readonly commands: ReadonlyMap<string, number>;
  readonly requests: ReadonlyMap<string, number>;
}

/**
 * Counts the requests clients send Redis, by command, from MONITOR (which shows a script's own
 * commands apart, as sent by "lua"); the bench's own INFO calls are left out.
 */
class RequestCounter {
  readonly #client: Redis;
  readonly #monitor: Redis;
  readonly #counts = new Map<string, number>();
  readonly #inMulti = new Set<string>();
  #waiting: { marker: string; resolve: () => void } | undefined;

  private constructor(client: Redis, monitor: Redis) {
    this.#client = client;
    this.#monitor = monitor;
  }

  static async start(url: string): Promise<RequestCounter> {
    const client = new Redis(url);
    const counter = new RequestCounter(client, await client.monitor());
    counter.#monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source.includes('lua')) return;
      const name = (args[0] ?? '').toLowerCase();
      const waiting = counter.#waiting;
      if (name === 'echo' && waiting !== undefined && waiting.marker === args[1]) return waiting.resolve();
      // A transaction is one request (the client sends it in one write): counted once, as "multi".
      if (name === 'exec' || name === 'discard') return void counter.#inMulti.delete(source);
      if (counter.#inMulti.has(source)) return;
      if (name === 'multi') counter.#inMulti.add(source);
      counter.#counts.set(name, (counter.#counts.get(name) ?? 0) + 1);
    });
    return counter;
  }

  /** What was counted since the last call, once everything sent before it has been seen. */
  async take(via: Redis, ownCommands: number): Promise<Map<string, number>> {
    const marker = `paced-${Date.now()}-${Math.random()}`;
    const seen = new Promise<void>((resolve) => (this.#waiting = { marker, resolve }));
    await via.echo(marker);
    await seen;
    const counts = new Map(this.#counts);
    this.#counts.clear();
    // The bench's own INFO calls go through MONITOR too.
    const info = (counts.get('info') ?? 0) - ownCommands;
    if (info > 0) counts.set('info', info);
    else counts.delete('info');
    return counts;
  }

  async stop(): Promise<void> {
    this.#monitor.disconnect();
    this.#client.disconnect();
  }
}

export async function paced(h: Harness): Promise<Row> {
  // A round is about 50 ms of the proxy's CPU, and /proc counts it in 10 ms ticks: many pairs, summed.
  const pairs = h.quick ? 2 : 10;
  const followedRounds = h.quick ? 1 : 3;
  await h.script({ chunks: Array.from({ length: DELTAS }, (_, i) => ` word${i}`), delayMs: PACE_MS });
  const [service, follower] = await Promise.all([h.startService('service-paced'), h.startService('service-paced-follower')]);
  const proxy = await h.startProxy('proxy-paced');
  const agent = streamAgent(TURNS * 2);
  const redis = new Redis(h.stores.redisUrl, { lazyConnect: true });
  let counter: RequestCounter | undefined;
  try {
    const tokens = await Promise.all(userIds('paced', TURNS).map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    await redis.connect();
    counter = await RequestCounter.start(h.stores.redisUrl);
    const requests = counter;

    const serviceRound = async (followed: boolean): Promise<Round> => {
      await requests.take(redis, 0);
      const commands0 = await commandCalls(redis);
      const cpu0 = cpuMs(service.pid);
      const results = await Promise.all(
        tokens.map((t) => (followed ? followedTurn(service.ready, follower.ready, t, agent) : serviceStream(service.ready, t, agent).result)),
      );
      const cpu = cpuMs(service.pid) - cpu0;
      const commands = commandsBetween(commands0, await commandCalls(redis));
      checkAll(results, DELTAS, service.name);
      return {
        cpuUsPerDelta: (cpu * 1000) / (TURNS * DELTAS),
        streamingSeconds: results.reduce((a, r) => a + (r.endedAt - r.startedAt) / 1000, 0),
        commands,
        requests: await requests.take(redis, 2),
      };
    };
    const proxyRound = async (): Promise<number> => {
      const cpu0 = cpuMs(proxy.pid);
      const results = await Promise.all(tokens.map(() => proxyStream(proxy.ready, agent).result));
      const cpu = cpuMs(proxy.pid) - cpu0;
      checkAll(results, DELTAS, proxy.name);
      return (cpu * 1000) / (TURNS * DELTAS);
    };

    // Warm-up: JIT, pools, the users' first turn.
    await serviceRound(false);
    await proxyRound();
    await serviceRound(true);
    const s: Round[] = [];
    const p: number[] = [];
    for (let i = 0; i < pairs; i++) {
      // The order turns round every time, so a drift of the host's speed weighs on both sides alike.
      const [a, b] =
        i % 2 === 0 ? [await serviceRound(false), await proxyRound()] : await proxyRound().then(async (b) => [await serviceRound(false), b] as const);
      s.push(a);
      p.push(b);
    }
    const f: Round[] = [];
    for (let i = 0; i < followedRounds; i++) f.push(await serviceRound(true));

    const sCpu = s.reduce((a, r) => a + r.cpuUsPerDelta, 0) / s.length;
    const pCpu = p.reduce((a, x) => a + x, 0) / p.length;
    const ratio = sCpu / pCpu;
    const plain = perStreamingSecond(s);
    const followed = perStreamingSecond(f);
    const turnSeconds = median(s.map((r) => r.streamingSeconds / TURNS));
    const met = ratio <= 1.2 && plain.commands <= 30;
    return {
      id: 'paced',
      title: 'Paced turns',
      service:
        `${sCpu.toFixed(1)} µs CPU/delta; per turn and streaming second: ${plain.commands.toFixed(1)} Redis commands, ` +
        `${plain.requests.toFixed(1)} requests (followed from another instance: ${followed.commands.toFixed(1)}, ${followed.requests.toFixed(1)})`,
      baseline: `${pCpu.toFixed(1)} µs CPU/chunk (bare proxy)`,
      result: `${ratio.toFixed(2)}× the CPU; ${plain.commands.toFixed(1)} commands/s per turn`,
      goal: 'CPU ≤ 1.2×; ≤ 30 Redis commands/s per turn',
      met,
      how:
        `${TURNS} turns at once (one user each, a new conversation), each ${DELTAS} deltas ${PACE_MS} ms apart from the fake ` +
        `upstream (${turnSeconds.toFixed(2)} s from request to end, median), through the service and through the bare proxy ` +
        `(bench/lib/bare-proxy.ts); a warm-up round of each, then ${pairs} pairs of rounds (service and proxy, the order ` +
        'turned round each pair). CPU = user + system time of the server process (/proc/<pid>/stat) over the round, per delta ' +
        "(per chunk for the proxy), summed over the pairs (a round is a few ticks of /proc's 10 ms clock); the result is the " +
        "ratio of the sums, the pairs' ratios are in the details. Redis commands = INFO commandstats over a " +
        "service round (a script's own commands counted, and the EVALSHA itself); requests = what the service sent Redis, " +
        "as MONITOR shows it (a script's commands, shown as sent by lua, left out); both per turn per second of streaming " +
        '(each turn from its request to its end, as the client saw it). A turn nobody follows is the usual case; ' +
        `"followed": ${followedRounds} rounds where each turn is also followed from a second instance (GET …/stream from ` +
        "the first frame, to the end): the follower instance's reads and subscriptions are counted with the turn's.",
      notes: [
        `CPU per delta, pairs (service / proxy, µs): ${s.map((r, i) => `${r.cpuUsPerDelta.toFixed(1)} / ${(p[i] ?? NaN).toFixed(1)}`).join(', ')}; ` +
          `the median pair's ratio ${median(s.map((r, i) => r.cpuUsPerDelta / (p[i] ?? NaN))).toFixed(2)}`,
        `Redis commands per turn, unfollowed: ${perTurn(s, 'commands')}; followed: ${perTurn(f, 'commands')}`,
        `Redis requests per turn, unfollowed: ${perTurn(s, 'requests')}; followed: ${perTurn(f, 'requests')}`,
      ],
    };
  } finally {
    agent.destroy();
    await counter?.stop();
    redis.disconnect();
    await Promise.all([service.stop(), follower.stop(), proxy.stop()]);
  }
}

function perStreamingSecond(rounds: readonly Round[]): { commands: number; requests: number } {
  const seconds = rounds.reduce((a, r) => a + r.streamingSeconds, 0);
  const sum = (m: (r: Round) => ReadonlyMap<string, number>): number => rounds.reduce((a, r) => a + [...m(r).values()].reduce((x, y) => x + y, 0), 0);
  return { commands: sum((r) => r.commands) / seconds, requests: sum((r) => r.requests) / seconds };
}

/** Each command's count per turn over the rounds, most frequent first. */
function perTurn(rounds: readonly Round[], what: 'commands' | 'requests'): string {
  const total = new Map<string, number>();
  for (const r of rounds) for (const [name, n] of r[what]) total.set(name, (total.get(name) ?? 0) + n / (rounds.length * TURNS));
  return [...total]
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${n.toFixed(2)}`)
    .join(', ');
}

/**
 * A turn on `serviceUrl`, also followed from its first frame on `followerUrl` (attach, no Last-Event-ID)
 * until the terminal frame; the turn's result, once the follower also has every delta and the end.
 */
async function followedTurn(serviceUrl: string, followerUrl: string, token: string, agent: http.Agent): Promise<StreamResult> {
  let attached: Promise<void> | undefined;
  let head = '';
  const turn = serviceStream(serviceUrl, token, agent, (chunk) => {
    if (attached !== undefined) return;
    head += chunk.toString('utf8');
    const conversationId = /"conversationId":"([^"]+)"/.exec(head)?.[1];
    if (conversationId !== undefined) attached = follow(followerUrl, token, conversationId, agent);
  });
  const result = await turn.result;
  await attached;
  return result;
}

function follow(url: string, token: string, conversationId: string, agent: http.Agent): Promise<void> {
  return new Promise((resolve, reject) => {
    const deltas = new MarkerCounter(SERVICE_MARKERS.delta);
    const ends = new MarkerCounter(SERVICE_MARKERS.end);
    const req = http.get(new URL(`/api/advisor/conversations/${conversationId}/stream`, url), { agent, headers: { authorization: `Bearer ${token}` } });
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`attach answered ${res.statusCode}`));
      res.on('data', (chunk: Buffer) => {
        deltas.push(chunk);
        ends.push(chunk);
      });
      res.on('end', () =>
        deltas.count === DELTAS && ends.count === 1 ? resolve() : reject(new Error(`the follower got ${deltas.count} deltas, ${ends.count} ends`)),
      );
    });
    req.on('error', reject);
  });
}
