// Row 7: whole turns of a realistic length (a new conversation each, 200 deltas) per second, 20
// clients in a closed loop, service vs bare proxy, same fake upstream, alternating rounds: the fixed
// cost of a turn (checks, reservation, storing, settling) weighs here as it does for users.
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import type { Harness } from '../lib/harness.ts';
import { streamAgent } from '../lib/harness.ts';
import { cpuMs, pidsCpuMs, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import { commandCalls, commandsBetween, segmentsSent } from '../lib/sockets.ts';
import type { OpenStream, StreamResult } from '../lib/sse-client.ts';
import { distribution, int, median, ms } from '../lib/stats.ts';
import { proxyStream, serviceStream, userIds } from './targets.ts';

export const CLIENTS = 20;
export const DELTAS = 200;
/**
 * Turns per user in the whole run, so that no request meets the limit of 30 streamed messages per
 * rolling 60 s, whatever the timing.
 */
export const TURNS_PER_USER = 25;
/** Pieces of an advisor's answer, a word or two each, as providers stream them. */
export const WORDS =
  ' Exiting at the open after a gap down against you is a reasonable, rule-based decision if your plan said so; it' +
  ' becomes a process mistake when the exit was a reaction to the gap rather than to your invalidation level. Check' +
  ' the journal: where was the stop, what did the plan say about overnight risk, and did you size for a gap?';

export interface Round {
  readonly turnsPerSecond: number;
  readonly cpuUsPerTurn: number;
  /** CPU per turn of the other processes on the path (PostgreSQL backends, Redis, the fake, the load generator). */
  readonly pathUsPerTurn: ReadonlyMap<string, number>;
  readonly results: readonly StreamResult[];
}

/** Other processes whose CPU a round reads, by name. */
export type PathPids = ReadonlyMap<string, readonly number[]>;

/** Store requests of the service over one round, per turn. */
interface Trips {
  readonly postgres: number | undefined;
  readonly redis: number | undefined;
  /** Redis commands by name (INFO commandstats), per turn. */
  readonly commands: ReadonlyMap<string, number>;
}

export async function turns(h: Harness): Promise<Row> {
  const perRound = h.quick ? 300 : 800;
  const rounds = h.quick ? 2 : 7;
  // As in the time-to-first-delta row: a deployed instance has served thousands of turns already.
  const warmup = h.quick ? 300 : 2000;
  const users = Math.ceil((warmup + rounds * perRound) / TURNS_PER_USER) + CLIENTS;
  const words = WORDS.split(/(?= )/);
  await h.script({ chunks: Array.from({ length: DELTAS }, (_, i) => words[i % words.length] ?? ' word'), delayMs: 0 });
  const service = await h.startService('service-turns');
  const proxy = await h.startProxy('proxy-turns');
  // On the service's database, migrated by now.
  const floor = await h.startFloor('floor-turns');
  const serviceAgent = streamAgent(CLIENTS);
  const proxyAgent = streamAgent(CLIENTS);
  const floorAgent = streamAgent(CLIENTS);
  const redis = new Redis(h.stores.redisUrl, { lazyConnect: true });
  try {
    const ids = userIds('turns', users);
    const tokens = await Promise.all(ids.map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    await redis.connect();
    const pool = new UserPool(tokens, TURNS_PER_USER);
    const viaService = (): Promise<StreamResult> => pool.turn((token) => serviceStream(service.ready, token, serviceAgent));
    const viaProxy = (): Promise<StreamResult> => proxyStream(proxy.ready, proxyAgent).result;
    // The floor counts its turns under a rate-limit rule of its own, so the same users serve both.
    const floorPool = new UserPool(tokens, TURNS_PER_USER);
    const viaFloor = (): Promise<StreamResult> => floorPool.turn((token) => serviceStream(floor.ready, token, floorAgent));
    const ports = [Number(new URL(h.stores.databaseUrl).port || 5432), Number(new URL(h.stores.redisUrl).port)];

    const none: PathPids = new Map();
    await round(service, warmup, viaService, none);
    await round(proxy, warmup, viaProxy, none);
    await round(floor, warmup, viaFloor, none);
    // The service's pool has all its connections by now (it keeps them 5 minutes unused).
    const backends = await h.stores.pool.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
    );
    const servicePath: PathPids = new Map([
      ['PostgreSQL backends', backends.rows.map((r) => r.pid)],
      ['Redis', [h.stores.redisPid]],
      ['fake upstream', [h.fake.pid]],
    ]);
    const proxyPath: PathPids = new Map([['fake upstream', [h.fake.pid]]]);
    const s: Round[] = [];
    const p: Round[] = [];
    const f: Round[] = [];
    const ratios: number[] = [];
    const floorRatios: number[] = [];
    const trips: Trips[] = [];
    const ownRatios: number[] = [];
    const serviceRound = async (): Promise<Round> => {
      const segments0 = segmentsSent(service.pid, ports);
      const commands0 = await commandCalls(redis);
      const a = await round(service, perRound, viaService, servicePath);
      const segments1 = segmentsSent(service.pid, ports);
      const commands1 = await commandCalls(redis);
      trips.push(tripsPerTurn(ports, segments0, segments1, commands0, commands1, perRound));
      return a;
    };
    for (let i = 0; i < rounds; i++) {
      // The order turns round every time (service, floor, proxy; then proxy, floor, service): a drift of the
      // host's speed over a few seconds weighs on each side alike, and the service's round always sits next
      // to its floor's, so that their ratio compares two rounds of the same moment.
      let a: Round, b: Round, c: Round;
      if (i % 2 === 0) {
        a = await serviceRound();
        c = await round(floor, perRound, viaFloor, servicePath);
        b = await round(proxy, perRound, viaProxy, proxyPath);
      } else {
        b = await round(proxy, perRound, viaProxy, proxyPath);
        c = await round(floor, perRound, viaFloor, servicePath);
        a = await serviceRound();
      }
      s.push(a);
      p.push(b);
      f.push(c);
      ratios.push(a.turnsPerSecond / b.turnsPerSecond);
      floorRatios.push(c.turnsPerSecond / b.turnsPerSecond);
      ownRatios.push(a.turnsPerSecond / c.turnsPerSecond);
    }
    const charges = await h.stores.pool.query<{ source: string; status: string; n: string }>(
      `select source, status, count(*) as n from turn_charges where user_id like 'turns-%' group by 1, 2 order by 3 desc`,
    );
    const paid = charges.rows.map((r) => `${int(Number(r.n))} ${r.source} (${r.status})`).join(', ');
    const allowance = charges.rows.every((r) => r.source === 'allowance' && r.status === 'charged');
    const served = charges.rows.reduce((a, r) => a + Number(r.n), 0);
    // The service's turns and the floor's, both stored and paid as the rules say.
    const expected = 2 * (warmup + rounds * perRound);
    if (!allowance || served !== expected) throw new Error(`turns paid: ${paid}; expected ${expected} allowance turns, charged`);

    // Each ratio is the median of the rounds' own ratios (two rounds of the same moment), not a ratio of medians.
    const ratio = median(ratios);
    const floorRatio = median(floorRatios);
    const ownRatio = median(ownRatios);
    const spread = (xs: readonly number[]): string => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
    const sRate = median(s.map((r) => r.turnsPerSecond));
    const pRate = median(p.map((r) => r.turnsPerSecond));
    const fRate = median(f.map((r) => r.turnsPerSecond));
    const sCpu = median(s.map((r) => r.cpuUsPerTurn));
    const pCpu = median(p.map((r) => r.cpuUsPerTurn));
    const fCpu = median(f.map((r) => r.cpuUsPerTurn));
    const show = (rate: number, cpu: number): string => `${rate.toFixed(0)} turns/s (${int(rate * DELTAS)} deltas/s) · ${ms(cpu / 1000)} ms CPU/turn`;
    const latency = (rs: readonly Round[]): string => {
      const all = rs.flatMap((r) => r.results);
      const whole = distribution(all.map((r) => r.endedAt - r.startedAt));
      const first = distribution(all.map((r) => (r.firstDeltaAt ?? NaN) - r.startedAt));
      const last = distribution(all.map((r) => r.endedAt - (r.lastDeltaAt ?? NaN)));
      return (
        `turn p50 ${ms(whole.p50)} ms, p99 ${ms(whole.p99)} ms; first delta p50 ${ms(first.p50)} ms, p99 ${ms(first.p99)} ms; ` +
        `last delta to the end p50 ${ms(last.p50)} ms, p99 ${ms(last.p99)} ms`
      );
    };
    const perTurn = (x: number | undefined): string => (x === undefined ? 'n/a' : x.toFixed(2));
    // CPU of the whole path per turn, each process's median over the rounds, in ms.
    const path = (server: string, rs: readonly Round[], cpu: number): string => {
      const parts: [string, number][] = [[server, cpu / 1000]];
      for (const name of rs[0]?.pathUsPerTurn.keys() ?? []) parts.push([name, median(rs.map((r) => r.pathUsPerTurn.get(name) ?? NaN)) / 1000]);
      const sum = parts.reduce((a, [, x]) => a + x, 0);
      return `${parts.map(([name, x]) => `${name} ${ms(x)}`).join(' + ')} = ${ms(sum)}`;
    };
    const trip = {
      postgres: median(trips.map((t) => t.postgres ?? NaN)),
      redis: median(trips.map((t) => t.redis ?? NaN)),
    };
    const perCommand = new Map<string, number>();
    for (const t of trips) for (const [name, n] of t.commands) perCommand.set(name, (perCommand.get(name) ?? 0) + n / trips.length);
    const commands = [...perCommand]
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name} ${perTurn(n)}`)
      .join(', ');
    return {
      id: 'turns',
      title: 'Relay of realistic replies',
      service: show(sRate, sCpu),
      baseline: `${show(pRate, pCpu)} (bare proxy); the floor ${show(fRate, fCpu)}`,
      result:
        `${ratio.toFixed(2)}× the rate, ${(sCpu / pCpu).toFixed(1)}× the CPU; the floor ${floorRatio.toFixed(2)}× the proxy's rate` +
        `${floorRatio < 0.8 ? " (the goal is below this machine's floor)" : ''}; the service ${ownRatio.toFixed(2)}× the floor's rate, ` +
        `${(sCpu / fCpu).toFixed(2)}× its CPU`,
      goal: 'rate ≥ 0.8× the bare proxy',
      met: ratio >= 0.8,
      how:
        `${CLIENTS} clients in a closed loop (each starts its next turn when its stream has ended), every turn a new ` +
        `conversation (POST /api/advisor/conversations/new/messages/stream) whose reply is ${DELTAS} deltas of a word or two, ` +
        'sent by the fake upstream process without delay; the same through the bare proxy of the relay row. A warm-up of ' +
        `${warmup} turns on each side, then ${rounds} rounds of ${perRound} turns on each, in an order that turns round every time (service, floor, ` +
        "proxy; then proxy, floor, service), so that a drift of the host's speed weighs on each side alike. Rate = turns / " +
        "wall time from the round's first request to its last stream's end; every stream checked complete (status 200, a start " +
        `frame first, all ${DELTAS} deltas, the end frame), any other answer fails the row. Each ratio is the median of ` +
        "the rounds' own ratios (the service's round against the floor's next to it, each against the proxy's of its " +
        'round), the rates shown are medians. CPU per turn = user + system time of the server process (from ' +
        "/proc/<pid>/stat) over the round / turns; the details add the CPU per turn of the other processes on each side's path " +
        "(the database's client backends, redis-server, the fake upstream, the load generator), which share the same cores. " +
        `${users} users (pro tier, each saved its key through the API) take turns from a queue, so none has two streams at ` +
        `once and none sends more than ${TURNS_PER_USER} in the whole run (the limit is 30 per rolling 60 s); every turn is ` +
        "paid from the pro tier's monthly allowance (1,000 turns; the default model, gpt-4o-mini, is an allowance model of the " +
        'built-in catalogue), checked in turn_charges after the run. Store round trips per turn: TCP data segments the service ' +
        "process sent to PostgreSQL and to Redis over a round (`ss`), and Redis's own count of commands (INFO commandstats). " +
        'The details also give times at the client over the measured rounds: a whole turn, its first delta, and its last ' +
        'delta to the end of the response (the service stores the reply, settles the charge and releases the lease before its ' +
        "end frame). The floor (bench/lib/turn-floor.ts, its own process, the service's node flags, the same users, its own " +
        'rate-limit rule) is a bare node:http server doing only what the rules make every turn do, in their order, through the ' +
        "service's own stores and rule code: the token (remembered once verified), the rate-limit verdict and the lease (one " +
        "Redis script, asked before the body is read), the body, the reads, the checks, the reservation and the turn's rows in " +
        "one statement with its commit (the user's provider key as last read, compared there, then decrypted), the provider " +
        "call with the service's request " +
        '(system prompt, tools) and its stream translated into frames, every frame into the shared frame log and to the client ' +
        'from it, the reply and the charge settled in one statement with its commit, the lease released, the terminal frame; ' +
        'none of Fastify, request logs, metrics or the live-turn machinery. Its rate against the proxy is what any ' +
        "implementation of the rules on these stores can reach on this machine; the service's against it is the service's own cost.",
      notes: [
        `rounds, turns/s: service ${s.map((r) => r.turnsPerSecond.toFixed(0)).join(', ')}; bare proxy ${p.map((r) => r.turnsPerSecond.toFixed(0)).join(', ')}; ` +
          `floor ${f.map((r) => r.turnsPerSecond.toFixed(0)).join(', ')}; the rounds' ratios: service vs floor ${spread(ownRatios)}, ` +
          `floor vs proxy ${spread(floorRatios)}, service vs proxy ${spread(ratios)}`,
        `service ${latency(s)}; bare proxy ${latency(p)}; floor ${latency(f)}`,
        `CPU per turn on the whole path, ms: ${path('service', s, sCpu)}; ${path('bare proxy', p, pCpu)}; ${path('floor', f, fCpu)}`,
        `per turn, round trips (requests sent) to PostgreSQL ${perTurn(trip.postgres)}, to Redis ${perTurn(trip.redis)}; Redis commands, ` +
          `with those its scripts run: ${commands || 'n/a'}; turns paid: ${paid}`,
      ],
    };
  } finally {
    redis.disconnect();
    serviceAgent.destroy();
    proxyAgent.destroy();
    floorAgent.destroy();
    await Promise.all([service.stop(), proxy.stop(), floor.stop()]);
  }
}

/**
 * Users waiting for their next turn, first in first out: a user is out of the queue while its turn
 * streams (one stream per user) and leaves it for good after `perUser` turns.
 */
export class UserPool {
  readonly #idle: { token: string; turns: number }[];
  readonly #perUser: number;

  constructor(tokens: readonly string[], perUser: number) {
    this.#idle = tokens.map((token) => ({ token, turns: 0 }));
    this.#perUser = perUser;
  }

  async turn(open: (token: string) => OpenStream): Promise<StreamResult> {
    const user = this.#idle.shift();
    if (user === undefined) throw new Error('no user left with turns to spare: more users are needed');
    try {
      return await open(user.token).result;
    } finally {
      if (++user.turns < this.#perUser) this.#idle.push(user);
    }
  }
}

/** `turns` turns by CLIENTS clients in a closed loop; throws unless every one was a complete 200 stream. */
export async function round(target: Proc, turns: number, turn: () => Promise<StreamResult>, path: PathPids): Promise<Round> {
  const results: StreamResult[] = [];
  let started = 0;
  const path0 = new Map([...path].map(([name, pids]) => [name, pidsCpuMs(pids)]));
  const client0 = process.cpuUsage();
  const cpu0 = cpuMs(target.pid);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (started < turns) {
        started++;
        results.push(await turn());
      }
    }),
  );
  const wall = performance.now() - t0;
  const cpu = cpuMs(target.pid) - cpu0;
  const client = process.cpuUsage(client0);
  const pathUsPerTurn = new Map([...path].map(([name, pids]) => [name, ((pidsCpuMs(pids) - (path0.get(name) ?? 0)) * 1000) / turns]));
  pathUsPerTurn.set('load generator', (client.user + client.system) / turns);
  const refused = results.filter((r) => r.status !== 200);
  if (refused.length > 0) {
    const byStatus = new Map<number, number>();
    for (const r of refused) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    const counts = [...byStatus].map(([status, n]) => `${n} × ${status}`).join(', ');
    throw new Error(`${target.name}: ${refused.length} of ${results.length} turns not 200 (${counts}; e.g. ${refused[0]?.error ?? ''})`);
  }
  const bad = results.filter((r) => !r.opened || !r.complete || r.deltas !== DELTAS);
  if (bad.length > 0) {
    const r = bad[0];
    throw new Error(
      `${target.name}: ${bad.length} of ${results.length} streams incomplete (e.g. start frame ${r?.opened ? 'seen' : 'missing'}, ` +
        `${r?.deltas} deltas, ${r?.error ?? (r?.complete ? 'ended' : 'no end marker')}; body ended ${JSON.stringify(r?.tail.slice(-160) ?? '')})`,
    );
  }
  return { turnsPerSecond: (turns * 1000) / wall, cpuUsPerTurn: (cpu * 1000) / turns, pathUsPerTurn, results };
}

function tripsPerTurn(
  ports: readonly number[],
  segments0: Map<number, number> | undefined,
  segments1: Map<number, number> | undefined,
  commands0: ReadonlyMap<string, number>,
  commands1: ReadonlyMap<string, number>,
  turns: number,
): Trips {
  const sent = (port: number | undefined): number | undefined => {
    if (port === undefined || segments0 === undefined || segments1 === undefined) return undefined;
    return ((segments1.get(port) ?? 0) - (segments0.get(port) ?? 0)) / turns;
  };
  const commands = new Map([...commandsBetween(commands0, commands1)].map(([name, n]) => [name, n / turns]));
  return { postgres: sent(ports[0]), redis: sent(ports[1]), commands };
}
