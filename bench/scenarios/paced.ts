// Row "paced turns": turns at a provider's pace (40 deltas 25 ms apart), 40 at once: the service's
// CPU per delta against the bare proxy's per chunk, and what each turn sends Redis per streaming second
// — commands (INFO commandstats, a script's own commands included) and requests (round trips: what
// MONITOR shows a client sent, not the commands a script ran). Unfollowed turns (the usual case) and
// turns followed from a second instance are measured apart.
import http from 'node:http';
import { Redis } from 'ioredis';
import type { Harness } from '../lib/harness.ts';
import { streamAgent } from '../lib/harness.ts';
import { setTimeout as delay } from 'node:timers/promises';
import { onCpuMs } from '../lib/procs.ts';
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
/**
 * A round's CPU and Redis counts are read this long after its last client saw its end: a turn's work
 * goes on a little after its terminal frame (the frame log's last write and its answer, the turn's log
 * lines), and read at once it would fall outside every service round that a proxy round follows.
 */
const SETTLE_MS = 200;

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
  const pairs = h.quick ? 2 : 10;
  const longPairs = h.quick ? 1 : 4;
  const followedRounds = h.quick ? 1 : 3;
  const play = (deltas: number): Promise<void> => h.script({ chunks: Array.from({ length: deltas }, (_, i) => ` word${i}`), delayMs: PACE_MS });
  await play(DELTAS);
  const [service, follower] = await Promise.all([h.startService('service-paced'), h.startService('service-paced-follower')]);
  const proxy = await h.startProxy('proxy-paced');
  // The floor (bench/lib/turn-floor.ts): only what the rules make every turn do, its own rate-limit rule.
  const floor = await h.startFloor('floor-paced');
  const agent = streamAgent(TURNS * 2);
  const redis = new Redis(h.stores.redisUrl, { lazyConnect: true });
  let counter: RequestCounter | undefined;
  try {
    const tokens = await Promise.all(userIds('paced', TURNS).map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    await redis.connect();
    counter = await RequestCounter.start(h.stores.redisUrl);
    const requests = counter;

    const serviceRound = async (followed: boolean, deltas = DELTAS): Promise<Round> => {
      await requests.take(redis, 0);
      const commands0 = await commandCalls(redis);
      const cpu0 = onCpuMs(service.pid);
      const results = await Promise.all(
        tokens.map((t) => (followed ? followedTurn(service.ready, follower.ready, t, agent) : serviceStream(service.ready, t, agent).result)),
      );
      await delay(SETTLE_MS);
      const cpu = onCpuMs(service.pid) - cpu0;
      const commands = commandsBetween(commands0, await commandCalls(redis));
      checkAll(results, deltas, service.name);
      return {
        cpuUsPerDelta: (cpu * 1000) / (TURNS * deltas),
        streamingSeconds: results.reduce((a, r) => a + (r.endedAt - r.startedAt) / 1000, 0),
        commands,
        requests: await requests.take(redis, 2),
      };
    };
    /** A round of the bare proxy or the floor: CPU per delta (per chunk for the proxy), µs. */
    const otherRound = async (side: 'proxy' | 'floor', deltas = DELTAS): Promise<number> => {
      const proc = side === 'proxy' ? proxy : floor;
      const cpu0 = onCpuMs(proc.pid);
      const results = await Promise.all(tokens.map((t) => (side === 'proxy' ? proxyStream(proxy.ready, agent) : serviceStream(floor.ready, t, agent)).result));
      await delay(SETTLE_MS);
      const cpu = onCpuMs(proc.pid) - cpu0;
      checkAll(results, deltas, proc.name);
      return (cpu * 1000) / (TURNS * deltas);
    };
    /**
     * Rounds of the three sides, in an order that turns round every time (service, floor, proxy; then proxy,
     * floor, service), so that a drift of the host's speed weighs on each side alike.
     */
    const pairsOf = async (n: number, deltas: number): Promise<{ s: Round[]; p: number[]; f: number[] }> => {
      const s: Round[] = [];
      const p: number[] = [];
      const f: number[] = [];
      for (let i = 0; i < n; i++) {
        if (i % 2 === 0) {
          s.push(await serviceRound(false, deltas));
          f.push(await otherRound('floor', deltas));
          p.push(await otherRound('proxy', deltas));
        } else {
          p.push(await otherRound('proxy', deltas));
          f.push(await otherRound('floor', deltas));
          s.push(await serviceRound(false, deltas));
        }
      }
      return { s, p, f };
    };

    // Warm-up: JIT, pools, the users' first turn.
    await serviceRound(false);
    await otherRound('proxy');
    await otherRound('floor');
    await serviceRound(true);
    const { s, p, f: fl } = await pairsOf(pairs, DELTAS);
    // Turns twice as long: what a delta costs beyond the turn's own start and end (the difference), and what those cost.
    await play(2 * DELTAS);
    const long = await pairsOf(longPairs, 2 * DELTAS);
    await play(DELTAS);
    const f: Round[] = [];
    for (let i = 0; i < followedRounds; i++) f.push(await serviceRound(true));

    const sCpu = s.reduce((a, r) => a + r.cpuUsPerDelta, 0) / s.length;
    const mean = (xs: readonly number[]): number => xs.reduce((a, x) => a + x, 0) / xs.length;
    const pCpu = mean(p);
    const fCpu = mean(fl);
    const ratio = sCpu / pCpu;
    const floorRatio = fCpu / pCpu;
    const sSplit = split(sCpu, long.s.reduce((a, r) => a + r.cpuUsPerDelta, 0) / long.s.length);
    const pSplit = split(pCpu, mean(long.p));
    const fSplit = split(fCpu, mean(long.f));
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
      baseline: `${pCpu.toFixed(1)} µs CPU/chunk (bare proxy); the floor ${fCpu.toFixed(1)} µs CPU/delta`,
      result:
        `${ratio.toFixed(2)}× the CPU; the floor ${floorRatio.toFixed(2)}×${floorRatio > 1.2 ? " (the goal is below this machine's floor)" : ''}; ` +
        `the service ${(sCpu / fCpu).toFixed(2)}× the floor's; ${plain.commands.toFixed(1)} commands/s per turn`,
      goal: 'CPU ≤ 1.2×; ≤ 30 Redis commands/s per turn',
      met,
      how:
        `${TURNS} turns at once (one user each, a new conversation), each ${DELTAS} deltas ${PACE_MS} ms apart from the fake ` +
        `upstream (${turnSeconds.toFixed(2)} s from request to end, median), through the service, through the bare proxy ` +
        `(bench/lib/bare-proxy.ts) and through the floor (bench/lib/turn-floor.ts: only what the rules make every turn do, ` +
        "its own process with the service's node flags, the same users under its own rate-limit rule; see the realistic-replies " +
        `row); a warm-up round of each, then ${pairs} rounds of each, in an order that turns round every time (service, floor, ` +
        'proxy; then proxy, floor, service). CPU = on-CPU time of the server process, every thread (user and system, GC included, ' +
        `/proc/<pid>/task/*/schedstat, to the nanosecond), from a round's first request to ${SETTLE_MS} ms after its last ` +
        "client saw its end (a turn's last frame-log write and log lines come after its terminal frame), per delta (per " +
        "chunk for the proxy), summed over the pairs; the result is the ratio of the sums, the pairs' ratios are in the " +
        `details. Then ${longPairs} pairs of rounds of turns twice as long (${2 * DELTAS} deltas): the difference splits each ` +
        "side's CPU into what a turn costs whatever its length (its request, start and end) and what each delta adds. " +
        'Redis commands = INFO commandstats over a ' +
        "service round (a script's own commands counted, and the EVALSHA itself); requests = what the service sent Redis, " +
        "as MONITOR shows it (a script's commands, shown as sent by lua, left out); both per turn per second of streaming " +
        '(each turn from its request to its end, as the client saw it). A turn nobody follows is the usual case; ' +
        `"followed": ${followedRounds} rounds where each turn is also followed from a second instance (GET …/stream from ` +
        "the first frame, to the end): the follower instance's reads and subscriptions are counted with the turn's.",
      notes: [
        `CPU split: per turn whatever its length, service ${sSplit.turnMs.toFixed(2)} ms, floor ${fSplit.turnMs.toFixed(2)} ms, bare proxy ` +
          `${pSplit.turnMs.toFixed(2)} ms; each delta beyond it, service ${sSplit.deltaUs.toFixed(1)} µs, floor ${fSplit.deltaUs.toFixed(1)} µs, ` +
          `bare proxy ${pSplit.deltaUs.toFixed(1)} µs per chunk; ${2 * DELTAS}-delta turns (service / floor / proxy) ` +
          `${long.s.map((r, i) => `${r.cpuUsPerDelta.toFixed(1)} / ${(long.f[i] ?? NaN).toFixed(1)} / ${(long.p[i] ?? NaN).toFixed(1)}`).join(', ')} µs per delta`,
        `CPU per delta, rounds (service / floor / proxy, µs): ` +
          `${s.map((r, i) => `${r.cpuUsPerDelta.toFixed(1)} / ${(fl[i] ?? NaN).toFixed(1)} / ${(p[i] ?? NaN).toFixed(1)}`).join(', ')}; ` +
          `the median round's ratio against the proxy: service ${median(s.map((r, i) => r.cpuUsPerDelta / (p[i] ?? NaN))).toFixed(2)}, ` +
          `floor ${median(fl.map((x, i) => x / (p[i] ?? NaN))).toFixed(2)}`,
        `Redis commands per turn, unfollowed: ${perTurn(s, 'commands')}; followed: ${perTurn(f, 'commands')}`,
        `Redis requests per turn, unfollowed: ${perTurn(s, 'requests')}; followed: ${perTurn(f, 'requests')}`,
      ],
    };
  } finally {
    agent.destroy();
    await counter?.stop();
    redis.disconnect();
    await Promise.all([service.stop(), follower.stop(), proxy.stop(), floor.stop()]);
  }
}

/** CPU per delta at DELTAS and at twice as many, as a cost per turn whatever its length (ms) and one per delta (µs). */
function split(usPerDelta: number, usPerDeltaLong: number): { turnMs: number; deltaUs: number } {
  const turn = (usPerDelta * DELTAS) / 1000;
  const longTurn = (usPerDeltaLong * 2 * DELTAS) / 1000;
  const deltaUs = ((longTurn - turn) * 1000) / DELTAS;
  return { turnMs: turn - (deltaUs * DELTAS) / 1000, deltaUs };
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
