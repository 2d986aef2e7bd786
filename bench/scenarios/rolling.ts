// Issue 30 ("Past one machine"): a rolling restart of three instances under a steady load of advisor
// turns. Each instance in turn is sent SIGTERM (it drains, DESIGN §10) and started again on its port;
// the users behave as real clients (rolling-client.ts). Afterwards the shared stores are checked: no
// turn lost without a terminal frame, nothing stored twice, what clients assembled is what was stored,
// ledger = wallet (DESIGN §7, §8, §12). Also the per-turn costs a capacity model needs.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type pg from 'pg';
import type { Harness } from '../lib/harness.ts';
import { cpuMs, pidsCpuMs, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { seedKeysDirect } from '../lib/seed.ts';
import { commandCalls, commandsBetween, commitsSoFar, segmentsSent } from '../lib/sockets.ts';
import { distribution, int, ms } from '../lib/stats.ts';
import { CUT_SHARE, Load, MESSAGES_PER_CONVERSATION, type TurnView } from './rolling-client.ts';
import { userIds } from './targets.ts';

const INSTANCES = 3;
/** A model the built-in catalogue keeps out of the allowance: every turn is paid in credits (DESIGN §8). */
const PAID_MODEL = 'gpt-4.1';
const CREDITS_PER_TURN = 5;
const GRANT = 100_000;
/** Replies of 40 deltas 25 ms apart: about a second, so turns are live when an instance stops. */
const REPLY = { deltas: 40, delayMs: 25 };
/** A user's next message is sent this long after its previous one was (or when that ended, if later): under 30 per 60 s with room for retries. */
const PACE_MS = 2500;
/** Shorter than a reply, so a drain ends some turns with SHUTTING_DOWN (the default 25 s would let every one finish). */
const DRAIN_MS = 500;
const WORDS = ' Size the position from the stop, not from the conviction; the journal shows your losers ran longer than plan.'.split(/(?= )/);

interface Restart {
  readonly instance: number;
  readonly sigtermAt: number;
  readonly exitedAt: number;
  readonly readyAt: number;
  readonly exit: string;
  /** CPU the new process spent from its start until ready. */
  readonly startCpuMs: number;
}

/** What the steady window (no restart) cost the instances and the stores. */
interface Counters {
  readonly at: number;
  readonly cpuMs: number;
  readonly commands: Map<string, number>;
  readonly commits: number;
  readonly segments: { postgres: number; redis: number } | undefined;
}

export async function rolling(h: Harness): Promise<Row> {
  const users = h.quick ? 30 : 60;
  // `ramp`: from the load's start to the steady window (the instances' code warming up), which lasts until the first restart.
  const phase = h.quick ? { ramp: 3000, before: 10_000, between: 3000, after: 10_000 } : { ramp: 10_000, before: 30_000, between: 5000, after: 20_000 };
  await h.script({ chunks: Array.from({ length: REPLY.deltas }, (_, i) => WORDS[i % WORDS.length] ?? ' word'), delayMs: REPLY.delayMs });
  const env = { SHUTDOWN_DRAIN_MS: String(DRAIN_MS) };
  const instances: Proc[] = await Promise.all(Array.from({ length: INSTANCES }, (_, i) => h.startService(`service-rolling-${i}`, env)));
  const urls = instances.map((p) => p.ready);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const redis = new Redis(h.stores.redisUrl, { lazyConnect: true });
  const load = new Load(urls, agent);
  try {
    const ids = userIds('rolling', users);
    await seedKeysDirect(h.stores.pool, ids, PAID_MODEL);
    await grantCredits(h.stores.pool, ids, GRANT);
    const tokens = await Promise.all(ids.map((u) => h.token(u)));
    await redis.connect();
    const ports = [Number(new URL(h.stores.databaseUrl).port || 5432), Number(new URL(h.stores.redisUrl).port)];
    const counters = async (): Promise<Counters> => {
      const [commands, commits] = await Promise.all([commandCalls(redis), commitsSoFar(h.stores.pool)]);
      let segments: Counters['segments'] = { postgres: 0, redis: 0 };
      for (const p of instances) {
        const sent = segmentsSent(p.pid, ports);
        if (sent === undefined || segments === undefined) segments = undefined;
        else segments = { postgres: segments.postgres + (sent.get(ports[0] ?? 0) ?? 0), redis: segments.redis + (sent.get(ports[1] ?? 0) ?? 0) };
      }
      return { at: performance.now(), cpuMs: pidsCpuMs(instances.map((p) => p.pid)), commands, commits, segments };
    };

    let stopping = false;
    const t0 = performance.now();
    const running = Promise.all(tokens.map((t, i) => load.user(t, PACE_MS, (i * PACE_MS) / users, () => stopping)));
    await sleep(phase.ramp);
    const steady0 = await counters();
    await sleep(phase.before - phase.ramp);
    const steady1 = await counters();
    const restarts: Restart[] = [];
    for (let i = 0; i < INSTANCES; i++) {
      if (i > 0) await sleep(phase.between);
      restarts.push(await restart(h, instances, i, env));
    }
    await sleep(phase.after);
    stopping = true;
    const stopAt = performance.now();
    await running;
    // pg_stat_database lags up to a second behind the commits it counts.
    await sleep(1000);
    const commitsAfter = await commitsSoFar(h.stores.pool);

    const first = restarts[0]?.sigtermAt ?? stopAt;
    const last = restarts.at(-1)?.readyAt ?? stopAt;
    const turns = load.turns;
    const doneAt = turns.flatMap((t) => (t.end?.event === 'done' ? [t.end.at] : [])).sort((a, b) => a - b);
    const completedIn = (from: number, to: number): number => doneAt.filter((x) => x >= from && x < to).length;
    const rate = (from: number, to: number): number => (completedIn(from, to) * 1000) / (to - from);
    const gap = longestGap(doneAt, t0 + phase.ramp, stopAt);
    const steadyTurns = completedIn(steady0.at, steady1.at);
    const perTurn = (x: number): string => (x / steadyTurns).toFixed(2);
    const steadyCommands = commandsBetween(steady0.commands, steady1.commands);
    let steadyRedis = 0;
    for (const n of steadyCommands.values()) steadyRedis += n;

    const checks = await check(h.stores.pool, ids, turns);
    const started = turns.filter((t) => t.assistantMessageId !== undefined);
    const byEnd = new Map<string, number>();
    for (const t of turns) {
      const key = t.end === undefined ? 'lost' : t.end.event === 'done' ? `done (${t.end.finishReason ?? '?'})` : `${t.end.event} ${t.end.code ?? ''}`.trim();
      byEnd.set(key, (byEnd.get(key) ?? 0) + 1);
    }
    const lost = byEnd.get('lost') ?? 0;
    const completed = doneAt.length;
    const badExits = restarts.filter((r) => r.exit !== 'exit 0');
    const broken = [
      ...checks.broken,
      ...(lost > 0 ? [`${lost} turns lost without a terminal frame`] : []),
      ...badExits.map((r) => `instance ${r.instance}: ${r.exit}`),
    ];
    const latency = (from: number, to: number): string => {
      const d = distribution(load.messages.filter((m) => m.done && m.sentAt >= from && m.sentAt < to).map((m) => m.endedAt - m.sentAt));
      return `p50 ${ms(d.p50, 0)} ms, p99 ${ms(d.p99, 0)} ms, max ${ms(d.max, 0)} ms (${int(d.n)})`;
    };
    const at = (x: number): string => `${((x - t0) / 1000).toFixed(1)} s`;
    const list = (m: Iterable<[string, number]>): string => [...m].map(([k, n]) => `${k} ${int(n)}`).join(', ');
    const segments = steady0.segments && steady1.segments;
    return {
      id: 'rolling',
      title: 'Rolling restart under load',
      service:
        `${int(turns.length)} turns: ${int(completed)} done, ${int(turns.length - completed - lost)} ended with an error, ${int(lost)} lost · ` +
        `${rate(t0 + phase.ramp, first).toFixed(1)} → ${rate(first, last).toFixed(1)} → ${rate(last, stopAt).toFixed(1)} turns/s before/during/after · ` +
        `longest gap without a completed turn ${ms(gap.ms / 1000)} s`,
      baseline: `the same load before the first restart: ${rate(t0 + phase.ramp, first).toFixed(1)} turns/s`,
      result: broken.length === 0 ? 'every invariant held' : `broken: ${broken.join('; ')}`,
      goal: 'no turn lost without a terminal frame; nothing stored twice; the text clients assembled = the stored reply; ledger = wallet',
      met: broken.length === 0,
      how:
        `${INSTANCES} service processes on the run's PostgreSQL and Redis, SHUTDOWN_DRAIN_MS=${DRAIN_MS} (shorter than a reply, so the ` +
        `drain ends some turns with SHUTTING_DOWN). ${users} users (pro tier, key rows written with the service's own vault, default model ` +
        `${PAID_MODEL}: not an allowance model, ${CREDITS_PER_TURN} credits a turn; ${int(GRANT)} credits each, granted through the ` +
        `service's own ledger function) each send a message every ${PACE_MS / 1000} s (or when the previous one ended, if later; ` +
        `${MESSAGES_PER_CONVERSATION} to a conversation, then a new one), round-robin over the instances; the fake replies with ` +
        `${REPLY.deltas} deltas ${REPLY.delayMs} ms apart. After ${phase.before / 1000} s, each instance in turn gets SIGTERM, is waited ` +
        'for until it exits, is started again on the same port and waited for until /readyz answers 200; ' +
        `${phase.between / 1000} s later the next; the load goes on ${phase.after / 1000} s after the last is ready. The clients ` +
        '(bench/scenarios/rolling-client.ts) parse every frame: a request that reached no instance or met a draining one (503) is sent ' +
        'again with the same clientMessageId to the next instance (a 409 STREAM_IN_PROGRESS for it: again after 1 s); a stream cut ' +
        'before its terminal frame is resumed on another instance (GET …/stream with Last-Event-ID), and so that resumes happen during ' +
        `the restarts, ${CUT_SHARE * 100}% of the turns have their first stream cut by the client itself after 1 to 30 deltas (a flaky ` +
        'network); a reply that ended with SHUTTING_DOWN is sent again with a new clientMessageId taking its place (`replaces`, as the ' +
        'web client\'s "Send again"); a message without a terminal frame 60 s after it was sent is lost. Checked afterwards in ' +
        'PostgreSQL: at most one user message per clientMessageId; the user messages stored = the turns clients saw start, less those ' +
        "replaced; the charges reserved = the turns clients saw start; every `done` turn's stored reply complete and equal to the text " +
        'its client assembled (no frame id seen twice or skipped), every other turn (not replaced) stored with its error code; no reply ' +
        'left streaming nor charge left reserved; per user, wallet balance = sum of its ledger entries = the grant less the credits of ' +
        'its charged turns; every instance exited 0. Throughput = turns ending `done` per second before the first SIGTERM (from ' +
        `${phase.ramp / 1000} s after the start), during the restarts (first SIGTERM to last ready) and after. Per turn, over the ` +
        'window before the first restart: CPU of the three instances (user + system, /proc/<pid>/stat) / turns completed, Redis ' +
        'commands (INFO commandstats), PostgreSQL commits (pg_stat_database.xact_commit) and TCP data segments the instances sent to ' +
        'PostgreSQL and Redis (`ss`).',
      notes: [
        `turns by end: ${list(byEnd)}; ${int(started.length)} saw their start frame; client retries and resumes: ${list(load.events) || 'none'}`,
        `restarts: ${restarts
          .map(
            (r) =>
              `instance ${r.instance} SIGTERM at ${at(r.sigtermAt)}, ${r.exit} after ${ms(r.exitedAt - r.sigtermAt, 0)} ms, ready ` +
              `${ms(r.readyAt - r.exitedAt, 0)} ms later (${ms(r.startCpuMs, 0)} ms CPU to start)`,
          )
          .join('; ')}; longest gap without a completed turn ${ms(gap.ms, 0)} ms, from ${at(gap.from)}`,
        `capacity, per turn (${int(steadyTurns)} turns in the ${((steady1.at - steady0.at) / 1000).toFixed(0)} s before the first restart): ` +
          `service CPU ${perTurn(steady1.cpuMs - steady0.cpuMs)} ms (sum over the ${INSTANCES} instances); Redis commands ${perTurn(steadyRedis)} ` +
          `(${[...steadyCommands]
            .sort((a, b) => b[1] - a[1])
            .map(([k, n]) => `${k} ${perTurn(n)}`)
            .join(', ')}); ` +
          `PostgreSQL commits ${perTurn(steady1.commits - steady0.commits - 1)}; round trips sent to PostgreSQL ` +
          `${segments ? perTurn((steady1.segments?.postgres ?? 0) - (steady0.segments?.postgres ?? 0)) : 'n/a'}, to Redis ` +
          `${segments ? perTurn((steady1.segments?.redis ?? 0) - (steady0.segments?.redis ?? 0)) : 'n/a'}; over the whole load ` +
          `${int(commitsAfter - steady0.commits)} commits for ${int(completed)} completed turns`,
        `a message's time from its first request to its \`done\` (a resend included), by when it was sent: before the restarts ` +
          `${latency(t0 + phase.ramp, first)}; during ${latency(first, last)}; after ${latency(last, stopAt)}`,
        `checks: ${checks.summary}`,
      ],
    };
  } finally {
    load.close();
    redis.disconnect();
    agent.destroy();
    await Promise.all(instances.map((p) => p.stop(30_000)));
  }
}

/** `ledger_append`, the service's own rule for a ledger entry and the balance moving with it (reserve-turn-function.ts). */
async function grantCredits(pool: pg.Pool, userIds: readonly string[], credits: number): Promise<void> {
  await pool.query('insert into wallets (user_id, balance) select unnest($1::text[]), 0 on conflict (user_id) do nothing', [userIds]);
  await pool.query(`select ledger_append(gen_random_uuid(), u, $2::bigint, 'grant', 'grant:bench-rolling-' || u, 'bench', now()) from unnest($1::text[]) u`, [
    userIds,
    credits,
  ]);
}

/** SIGTERM to instance `i`, its exit awaited, a new process on its port started and awaited until ready. */
async function restart(h: Harness, instances: Proc[], i: number, env: Record<string, string>): Promise<Restart> {
  const old = instances[i];
  if (old === undefined) throw new Error(`no instance ${i}`);
  const url = new URL(old.ready);
  const sigtermAt = performance.now();
  await old.stop(30_000);
  const exitedAt = performance.now();
  const exit = old.child.signalCode !== null ? `killed by ${old.child.signalCode}` : `exit ${old.child.exitCode}`;
  const fresh = await h.startService(`service-rolling-${i}-again`, { ...env, PORT: url.port });
  instances[i] = fresh;
  for (const deadline = performance.now() + 30_000; ;) {
    const ok = await fetch(new URL('/readyz', url)).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (performance.now() > deadline) throw new Error(`instance ${i} not ready within 30 s of its restart`);
    await sleep(50);
  }
  return { instance: i, sigtermAt, exitedAt, readyAt: performance.now(), exit, startCpuMs: cpuMs(fresh.pid) };
}

/** The longest time in [from, to) with no turn completing. */
function longestGap(sortedAt: readonly number[], from: number, to: number): { ms: number; from: number } {
  let best = { ms: 0, from };
  let prev = from;
  for (const x of [...sortedAt.filter((t) => t >= from && t < to), to]) {
    if (x - prev > best.ms) best = { ms: x - prev, from: prev };
    prev = x;
  }
  return best;
}

/** The invariants, read from the shared database after the load: what broke (empty: nothing) and a summary. */
async function check(pool: pg.Pool, userIds: readonly string[], turns: readonly TurnView[]): Promise<{ broken: string[]; summary: string }> {
  const broken: string[] = [];
  const fail = (n: number, what: string): void => void (n > 0 && broken.push(`${int(n)} ${what}`));
  fail(
    turns.reduce((a, t) => a + t.repeated, 0),
    'frames a client received twice',
  );
  fail(
    turns.reduce((a, t) => a + t.skipped, 0),
    'frame ids a client never received',
  );

  const userRows = await pool.query<{ id: string; client_message_id: string | null }>(
    `select id::text, client_message_id::text from messages where role = 'user' and user_id = any($1::text[])`,
    [userIds],
  );
  const perClientId = new Map<string, number>();
  for (const r of userRows.rows) if (r.client_message_id !== null) perClientId.set(r.client_message_id, (perClientId.get(r.client_message_id) ?? 0) + 1);
  fail([...perClientId.values()].filter((n) => n > 1).length, 'clientMessageIds stored more than once');
  const stored = new Set(userRows.rows.map((r) => r.id));
  const seen = new Set(turns.flatMap((t) => (t.userMessageId !== undefined && !t.replaced ? [t.userMessageId] : [])));
  const replaced = turns.flatMap((t) => (t.userMessageId !== undefined && t.replaced ? [t.userMessageId] : []));
  fail([...stored].filter((id) => !seen.has(id)).length, 'user messages stored that no client saw start (or that should have been replaced)');
  fail([...seen].filter((id) => !stored.has(id)).length, 'turns a client saw start whose user message is not stored');
  fail(replaced.filter((id) => stored.has(id)).length, 'replaced user messages still stored');

  const done = turns.filter((t) => t.end?.event === 'done' && t.assistantMessageId !== undefined);
  const failed = turns.filter((t) => t.end?.event === 'error' && t.assistantMessageId !== undefined && !t.replaced);
  const replies = await pool.query<{ id: string; status: string; content: string; error_code: string | null }>(
    `select id::text, status, content, error_code from messages where id = any($1::uuid[])`,
    [[...done, ...failed].map((t) => t.assistantMessageId)],
  );
  const reply = new Map(replies.rows.map((r) => [r.id, r]));
  fail(done.filter((t) => reply.get(t.assistantMessageId ?? '')?.status !== 'complete').length, '`done` turns whose stored reply is not complete');
  fail(
    done.filter((t) => (reply.get(t.assistantMessageId ?? '')?.content ?? null) !== t.text).length,
    '`done` turns whose assembled text differs from the stored reply',
  );
  fail(
    failed.filter((t) => {
      const r = reply.get(t.assistantMessageId ?? '');
      return r === undefined || r.status === 'complete' || r.status === 'streaming' || r.error_code !== (t.end?.code ?? null);
    }).length,
    'turns ended with `error` whose stored reply is missing, complete, streaming or of another code',
  );

  const left = await pool.query<{ streaming: number; reserved: number; charges: number; charged: number; returned: number }>(
    `select (select count(*)::int from messages where user_id = any($1::text[]) and status = 'streaming') as streaming,
            (select count(*)::int from turn_charges where user_id = any($1::text[]) and status = 'reserved') as reserved,
            (select count(*)::int from turn_charges where user_id = any($1::text[])) as charges,
            (select count(*)::int from turn_charges where user_id = any($1::text[]) and status = 'charged') as charged,
            (select count(*)::int from turn_charges where user_id = any($1::text[]) and status = 'returned') as returned`,
    [userIds],
  );
  const l = left.rows[0] ?? { streaming: NaN, reserved: NaN, charges: NaN, charged: NaN, returned: NaN };
  fail(l.streaming, 'replies left streaming');
  fail(l.reserved, 'charges left reserved');
  const startedTurns = new Set(turns.flatMap((t) => (t.assistantMessageId === undefined ? [] : [t.assistantMessageId]))).size;
  if (l.charges !== startedTurns) broken.push(`${int(l.charges)} turns reserved, ${int(startedTurns)} seen starting by their clients`);

  const money = await pool.query<{ user_id: string; balance: string; ledger: string; charged: string }>(
    `select w.user_id, w.balance::text,
            coalesce((select sum(amount) from ledger_entries e where e.user_id = w.user_id), 0)::text as ledger,
            coalesce((select sum(credits) from turn_charges c where c.user_id = w.user_id and c.status = 'charged'), 0)::text as charged
       from wallets w where w.user_id = any($1::text[])`,
    [userIds],
  );
  fail(money.rows.filter((r) => r.balance !== r.ledger).length, 'wallets whose balance is not the sum of their ledger');
  fail(money.rows.filter((r) => BigInt(r.ledger) !== BigInt(GRANT) - BigInt(r.charged)).length, 'ledgers that are not the grant less the charged turns');
  fail(userIds.length - money.rows.length, 'users without a wallet');
  return {
    broken,
    summary:
      `${int(userRows.rows.length)} user messages stored for ${int(perClientId.size)} clientMessageIds (${int(replaced.length)} replaced after ` +
      `SHUTTING_DOWN); ${int(done.length)} done turns and ${int(failed.length)} ended with an error (not replaced) compared with their stored reply; ${int(l.charges)} turns reserved: ${int(l.charged)} ` +
      `charged, ${int(l.returned)} returned, ${int(l.reserved)} still reserved; ${int(money.rows.length)} wallets = ledger checked`,
  };
}
