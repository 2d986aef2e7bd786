// Row `pooled` (issue 42 point 5, DESIGN §16): the realistic turns of the `turns` row, in one run, on three
// services of the same database: direct with named prepared statements; through PgBouncer 1.18 in
// transaction mode with prepared statements off and the function cache on (db/function-cache.ts); and
// the same with the function cache off (plain unnamed statements, the behaviour before it: the baseline).
// What it compares is PostgreSQL's CPU per turn: the backends' user + system time over a round.
import { startPgBouncer } from '../../test/helpers/pgbouncer.ts';
import type { Harness } from '../lib/harness.ts';
import { streamAgent } from '../lib/harness.ts';
import type { Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import { distribution, int, median, ms } from '../lib/stats.ts';
import { serviceStream, userIds } from './targets.ts';
import { CLIENTS, DELTAS, round, TURNS_PER_USER, UserPool, WORDS, type Round } from './turns.ts';

const GOAL = 1.3;

interface Side {
  readonly label: string;
  readonly service: Proc;
  readonly turn: () => ReturnType<UserPool['turn']>;
  readonly rounds: Round[];
}

export async function pooled(h: Harness): Promise<Row> {
  const perRound = h.quick ? 200 : 400;
  const rounds = h.quick ? 2 : 6;
  // Every backend past the five custom plans of each statement (20 direct connections, 10 through PgBouncer).
  const warmup = h.quick ? 300 : 600;
  const users = Math.ceil((warmup + rounds * perRound) / TURNS_PER_USER) + CLIENTS;
  const words = WORDS.split(/(?= )/);
  await h.script({ chunks: Array.from({ length: DELTAS }, (_, i) => words[i % words.length] ?? ' word'), delayMs: 0 });
  const database = new URL(h.stores.databaseUrl).pathname.slice(1);
  const bouncer = await startPgBouncer(h.stores.databaseUrl);
  const started: Proc[] = [];
  const agents = [streamAgent(CLIENTS), streamAgent(CLIENTS), streamAgent(CLIENTS)] as const;
  try {
    const throughBouncer = (functions: boolean): Record<string, string> => ({
      DATABASE_URL: `${bouncer.url}${database}`,
      DATABASE_PREPARED_STATEMENTS: 'false',
      DATABASE_STATEMENT_FUNCTIONS: String(functions),
      // The frame store's LISTEN and the migrations' session lock need a session of their own.
      DATABASE_LISTEN_URL: h.stores.databaseUrl,
    });
    // One after the other: the first migrates the run's database.
    const direct = await h.startService('pooled-direct');
    started.push(direct);
    const cached = await h.startService('pooled-functions', throughBouncer(true));
    started.push(cached);
    const plain = await h.startService('pooled-plain', throughBouncer(false));
    started.push(plain);
    const side = async (label: string, service: Proc, prefix: string, agent: (typeof agents)[number]): Promise<Side> => {
      const tokens = await Promise.all(userIds(prefix, users).map((u) => h.token(u)));
      await saveKeysViaApi(direct.ready, tokens, 10);
      const pool = new UserPool(tokens, TURNS_PER_USER);
      return { label, service, turn: () => pool.turn((token) => serviceStream(service.ready, token, agent)), rounds: [] };
    };
    const d = await side('direct', direct, 'pooled-d', agents[0]);
    const f = await side('PgBouncer, function cache', cached, 'pooled-f', agents[1]);
    const p = await side('PgBouncer, plain', plain, 'pooled-p', agents[2]);
    const sides: readonly Side[] = [d, f, p];
    // Every PostgreSQL client backend of the run's database but the bench's own: the sides not in their
    // round sit idle meanwhile, and each side's backends are all open by the end of the warm-up (kept 5 min
    // by the service's pool, 10 min by PgBouncer), so a round's CPU is its side's.
    const backends = async (): Promise<number[]> =>
      (
        await h.stores.pool.query<{ pid: number }>(
          `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
        )
      ).rows.map((r) => r.pid);
    for (const s of sides) await round(s.service, warmup, s.turn, new Map());
    const ratios: number[] = [];
    const baselineRatios: number[] = [];
    for (let i = 0; i < rounds; i++) {
      // The order turns round every time, so that a drift of the host's speed weighs on each side alike.
      const order = i % 2 === 0 ? sides : [...sides].reverse();
      for (const s of order) s.rounds.push(await round(s.service, perRound, s.turn, new Map([['PostgreSQL backends', await backends()]])));
      const pg = (s: Side): number => s.rounds[i]?.pathUsPerTurn.get('PostgreSQL backends') ?? NaN;
      ratios.push(pg(f) / pg(d));
      baselineRatios.push(pg(p) / pg(d));
    }
    const made = await h.stores.pool.query<{ n: number }>(`select count(*)::int as n from pg_proc where proname like 'advisor\\_q\\_%'`);
    const charges = await h.stores.pool.query<{ n: number }>(
      `select count(*)::int as n from turn_charges where user_id like 'pooled-%' and source = 'allowance' and status = 'charged'`,
    );
    const expected = 3 * (warmup + rounds * perRound);
    if (charges.rows[0]?.n !== expected) throw new Error(`turns paid: ${charges.rows[0]?.n}; expected ${expected} allowance turns, charged`);

    const pgMs = (s: Side): number => median(s.rounds.map((r) => r.pathUsPerTurn.get('PostgreSQL backends') ?? NaN)) / 1000;
    const serviceMs = (s: Side): number => median(s.rounds.map((r) => r.cpuUsPerTurn)) / 1000;
    const p50 = (s: Side): number => distribution(s.rounds.flatMap((r) => r.results.map((x) => x.endedAt - x.startedAt))).p50;
    const rate = (s: Side): number => median(s.rounds.map((r) => r.turnsPerSecond));
    const show = (s: Side): string =>
      `${s.label}: PostgreSQL ${ms(pgMs(s))} ms CPU/turn, service ${ms(serviceMs(s))} ms CPU/turn, turn p50 ${ms(p50(s))} ms, ${rate(s).toFixed(0)} turns/s`;
    const spread = (xs: readonly number[]): string => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
    const ratio = median(ratios);
    const baseline = median(baselineRatios);
    return {
      id: 'pooled',
      title: 'PostgreSQL CPU per turn behind a transaction pooler',
      service: `${show(f)}; ${show(d)}`,
      baseline: `${show(p)} (prepared statements off, no function cache: ${baseline.toFixed(2)}× direct)`,
      result: `${ratio.toFixed(2)}× direct's PostgreSQL CPU per turn (plain unnamed ${baseline.toFixed(2)}×)`,
      goal: `PostgreSQL CPU per turn through PgBouncer ≤ ${GOAL}× direct`,
      met: ratio <= GOAL,
      how:
        `Three service processes on the run's database, in one run: direct to PostgreSQL with named prepared statements (the default); ` +
        'through PgBouncer 1.18 in transaction mode (test/helpers/pgbouncer.ts, default_pool_size=10) with ' +
        'DATABASE_PREPARED_STATEMENTS=false and the function cache on (src/db/function-cache.ts); the same with ' +
        'DATABASE_STATEMENT_FUNCTIONS=false (plain unnamed statements, parsed and planned on every call: the baseline). ' +
        `The turns of the \`turns\` row: ${CLIENTS} clients in a closed loop, every turn a new conversation whose reply is ${DELTAS} ` +
        `deltas sent without delay by the fake upstream, every stream checked complete. A warm-up of ${warmup} turns on each side, then ` +
        `${rounds} rounds of ${perRound} turns on each, in an order that turns round every time. PostgreSQL CPU per turn = user + system ` +
        "time (/proc/<pid>/stat) of every client backend of the run's database over the round / turns (the other sides idle meanwhile); " +
        "the ratio is the median of the rounds' own ratios against the direct round of the same pass. Service CPU per turn is the " +
        "service process's; turn p50 is a whole turn's time at the client over the measured rounds. PgBouncer's own CPU is not counted.",
      notes: [
        `rounds, PostgreSQL CPU per turn against direct: function cache ${spread(ratios)}, plain ${spread(baselineRatios)}; ` +
          `statement functions in the database after the run: ${int(made.rows[0]?.n ?? 0)}`,
      ],
    };
  } finally {
    for (const a of agents) a.destroy();
    await Promise.all(started.map((p) => p.stop()));
    await bouncer.stop();
  }
}
