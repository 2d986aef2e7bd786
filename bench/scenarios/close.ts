// Issue 42 (DESIGN §16, "a turn's end is never given up"): N open streams closed at once, twice in one
// run — the service straight to PostgreSQL (prepared statements), then through PgBouncer in transaction
// mode — and how long until every turn's end is stored: no reply `streaming`, no charge `reserved`.
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { startPgBouncer } from '../../test/helpers/pgbouncer.ts';
import type { Harness } from '../lib/harness.ts';
import { ask, type Proc } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { seedKeysDirect } from '../lib/seed.ts';
import { segmentsSent } from '../lib/sockets.ts';
import { int } from '../lib/stats.ts';
import { SETTLE_MS, STARTING } from './memory.ts';
import { checkOpenFiles, unsettled } from './scale.ts';
import type { StreamsRequest } from './scale-streams.ts';
import { userIds } from './targets.ts';

/** DESIGN §16: nothing `streaming` or `reserved` this long after the close. */
const CLOSED_WITHIN_MS = 60_000;
/** Past the goal, the polling goes on this long to tell when (if ever) the rest was stored. */
const WATCH_MS = 300_000;
const POLL_MS = 250;
/** Times after the close at which the turns still open are reported. */
const MILESTONES_MS = [1000, 5000, 15_000, 30_000, CLOSED_WITHIN_MS] as const;
/** The service's log lines (src/features/billing/turn-billing.ts, src/features/conversations/live-turn.ts). */
const RETRY_MSG = 'storing the end of a turn failed; trying again';
const FAILED_MSG = 'storing and settling the turn failed';
/** pino's levels for `warn` and `error`. */
const WARN_LEVEL = 40;
const ERROR_LEVEL = 50;

interface Left {
  readonly streaming: number;
  readonly reserved: number;
}

interface ServiceLog {
  /** Lines RETRY_MSG, the distinct turns they name, their errors' messages, the longest wait asked. */
  readonly retries: number;
  readonly retriedTurns: number;
  readonly retryErrors: ReadonlyMap<string, number>;
  readonly maxRetryInMs: number;
  /** Lines FAILED_MSG: a turn's end given up. */
  readonly failed: number;
  /** Every error line, by message and error (FAILED_MSG's included). */
  readonly errors: ReadonlyMap<string, number>;
  /** Every warning line but RETRY_MSG's, by message. */
  readonly warnings: ReadonlyMap<string, number>;
}

interface Pass {
  readonly label: string;
  readonly openMs: number;
  /** From the close to every stream ended at the client. */
  readonly clientClosedMs: number;
  /** From the close to nothing left; undefined: still some after WATCH_MS. */
  readonly settledMs: number | undefined;
  readonly leftAt: ReadonlyMap<number, Left>;
  readonly leftAtEnd: Left;
  readonly log: ServiceLog;
  /** The replies' final statuses (with their error codes) and the charges', by count. */
  readonly replies: ReadonlyMap<string, number>;
  readonly charges: ReadonlyMap<string, number>;
  /** Requests (TCP data segments, bench/lib/sockets.ts) the service sent from the close to the end of the polling, by store. */
  readonly sent: ReadonlyMap<string, number> | undefined;
}

export async function close(h: Harness): Promise<Row> {
  const asked = Number(process.env.BENCH_SCALE_STREAMS ?? 0);
  const n = asked > 0 ? Math.floor(asked) : h.quick ? 1000 : 10_000;
  // One pass at a time: n streams open at once, two descriptors each in the service.
  checkOpenFiles(n, 'close', 'open streams at once');
  // One chunk, then silence with the connection open: the stream stays live until the client leaves.
  await h.script({ chunks: ['Hello', ' world'], stallAfterChunks: 1 });
  const direct = await pass(h, 'direct', n, {}, new Map([[portOf(h.stores.databaseUrl), 'PostgreSQL']]));
  const bouncer = await startPgBouncer(h.stores.databaseUrl);
  let pooled: Pass;
  try {
    const database = new URL(h.stores.databaseUrl).pathname.slice(1);
    pooled = await pass(
      h,
      'pgbouncer',
      n,
      {
        DATABASE_URL: `${bouncer.url}${database}`,
        DATABASE_PREPARED_STATEMENTS: 'false',
        // The frame store's LISTEN and the migrations' session lock need a session of their own.
        DATABASE_LISTEN_URL: h.stores.databaseUrl,
      },
      new Map([
        [portOf(bouncer.url), 'PgBouncer'],
        [portOf(h.stores.databaseUrl), 'PostgreSQL direct'],
      ]),
    );
  } finally {
    await bouncer.stop();
  }

  const passes = [direct, pooled];
  const s = (x: number): string => (x / 1000).toFixed(2);
  const left = (l: Left): number => l.streaming + l.reserved;
  const at60 = (p: Pass): Left => p.leftAt.get(CLOSED_WITHIN_MS) ?? p.leftAtEnd;
  const name = (p: Pass): string => (p.label === 'direct' ? 'direct' : 'through PgBouncer');
  const stored = (p: Pass): string => (p.settledMs === undefined ? `NOT all stored within ${WATCH_MS / 1000} s` : `all stored in ${s(p.settledMs)} s`);
  const counts = (m: ReadonlyMap<string, number>): string =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${int(v)}`)
      .join(', ') || 'none';
  const leftLine = (l: Left): string => `${int(l.streaming)} replies streaming, ${int(l.reserved)} charges reserved`;
  return {
    id: 'close',
    title: 'Streams closed at once',
    service: `${int(n)} open streams closed at once; ${passes
      .map(
        (p) =>
          `${name(p)}: ${stored(p)}, ${int(left(at60(p)))} streaming/reserved at ${CLOSED_WITHIN_MS / 1000} s, ` +
          `${int(p.log.retries)} settle retries (${int(p.log.retriedTurns)} turns), ${int(p.log.failed)} given up`,
      )
      .join(' · ')}`,
    baseline:
      'before the settlement was retried (issue 42, 9,979 streams): through PgBouncer 5,374 turns failed `storing and settling the turn failed` ' +
      '(`timeout exceeded when trying to connect`) and stayed `streaming` / `reserved` until the sweeper, 10 min later; direct 0',
    result: passes
      .map((p) => `${name(p)} ${int(left(at60(p)))} streaming/reserved at ${CLOSED_WITHIN_MS / 1000} s, ${int(p.log.failed)} ends given up`)
      .join('; '),
    goal: `no reply \`streaming\` and no charge \`reserved\` ${CLOSED_WITHIN_MS / 1000} s after the close, direct and through PgBouncer; no turn's end given up`,
    met: passes.every((p) => left(at60(p)) === 0 && p.log.failed === 0),
    how:
      `Two passes in one run, each a fresh service process on the run's PostgreSQL and Redis with STREAM_IDLE_TIMEOUT_MS=900000 and ` +
      'STREAM_DETACH_GRACE_MS=0 (a stream its client closes ends its turn at once), the default pool (DATABASE_POOL_SIZE=20, ' +
      'DATABASE_CONNECT_TIMEOUT_MS=5000): (a) direct to PostgreSQL, prepared statements on; (b) through PgBouncer 1.18 in transaction mode ' +
      '(test/helpers/pgbouncer.ts: default_pool_size=10, max_client_conn=1000) with DATABASE_PREPARED_STATEMENTS=false and ' +
      `DATABASE_LISTEN_URL direct. Each pass: ${int(n)} users of their own (pro tier, key rows written with the service's vault: ` +
      `bench/lib/seed.ts) each open one advisor stream (a new conversation), ${STARTING} being started at a time, from a client process ` +
      "of their own (scale's, bench/scenarios/scale-streams.ts); the fake sends one chunk and then nothing with the connection open " +
      `(\`stallAfterChunks: 1\`), so every turn stays live. ${SETTLE_MS / 1000} s after the last stream showed its first delta, the client ` +
      'closes every stream at once; from that moment the database is polled every 250 ms for the replies of those users still ' +
      `\`streaming\` and their charges still \`reserved\`: the time until none is left, the count left at ${CLOSED_WITHIN_MS / 1000} s ` +
      `(the goal) and at 1, 5, 15, 30 s, polling on up to ${WATCH_MS / 1000} s. From the service's log (read after it stopped): the ` +
      `settlement's retries ('${RETRY_MSG}', one line a retry, with the turn and the error) and the ends given up ('${FAILED_MSG}'), ` +
      "and every other error line. The replies' final statuses and the charges' are read afterwards, and the requests the service " +
      'sent to PgBouncer and to PostgreSQL from the close to the last poll (TCP data segments, `ss`: bench/lib/sockets.ts) show where the ends went.',
    notes: passes.flatMap((p) => [
      `${name(p)}: ${int(n)} streams opened in ${s(p.openMs)} s, all ended at the client ${s(p.clientClosedMs)} s after the close; ` +
        `${stored(p)}; replies streaming / charges reserved after ${[...p.leftAt].map(([t, l]) => `${t / 1000} s ${int(l.streaming)} / ${int(l.reserved)}`).join(', ')}` +
        `${p.settledMs === undefined ? `; at ${WATCH_MS / 1000} s ${leftLine(p.leftAtEnd)}` : ''}`,
      `${name(p)}: ${int(p.log.retries)} settle retries for ${int(p.log.retriedTurns)} turns (longest wait ${int(p.log.maxRetryInMs)} ms), ` +
        `errors: ${counts(p.log.retryErrors)}; ${int(p.log.failed)} '${FAILED_MSG}'; error lines: ${counts(p.log.errors)}; other warnings: ${counts(p.log.warnings)}; ` +
        `replies: ${counts(p.replies)}; charges: ${counts(p.charges)}; requests the service sent from the close to the last poll: ` +
        `${p.sent === undefined ? 'n/a (no ss)' : counts(p.sent)}`,
    ]),
  };
}

/** `stores`: the ports the service may send statements to, by name. */
async function pass(h: Harness, label: string, n: number, env: Record<string, string>, stores: ReadonlyMap<number, string>): Promise<Pass> {
  const users = userIds(`close${label[0] ?? ''}`, n);
  const service = await h.startService(`service-close-${label}`, { STREAM_IDLE_TIMEOUT_MS: '900000', STREAM_DETACH_GRACE_MS: '0', ...env });
  let streams: Proc | undefined;
  let watched: Omit<Pass, 'label' | 'log' | 'replies' | 'charges' | 'sent'>;
  let sent: Map<string, number> | undefined;
  try {
    // After the service's start: it migrates the database.
    await seedKeysDirect(h.stores.pool, users);
    const tokens = await Promise.all(users.map((u) => h.token(u)));
    streams = await h.procs.startNode(`close-streams-${label}`, 'bench/scenarios/scale-streams.ts', {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
      ipc: true,
      ready: /(scale streams ready)/,
    });
    const client = streams;
    const tell = <T extends object = object>(m: StreamsRequest): Promise<T> => ask<T>(client, m);
    const opened = await tell<{ openMs?: number; error?: string }>({ open: { url: service.ready, tokens, starting: STARTING } });
    if (opened.error !== undefined || opened.openMs === undefined) throw new Error(`close (${label}): ${opened.error ?? 'the streams did not open'}`);
    await delay(SETTLE_MS);
    const ports = [...stores.keys()];
    const sent0 = segmentsSent(service.pid, ports);
    const closedAt = performance.now();
    const clientClosed = tell({ close: true }).then(() => performance.now() - closedAt);
    const settling = await watch(h, users, closedAt);
    const sent1 = segmentsSent(service.pid, ports);
    if (sent0 !== undefined && sent1 !== undefined) {
      sent = new Map(ports.map((p) => [stores.get(p) ?? String(p), (sent1.get(p) ?? 0) - (sent0.get(p) ?? 0)]));
      // The turns' ends went where DATABASE_URL points (the first of `stores`), or this pass measured something else.
      const [via = ''] = stores.values();
      if (!((sent.get(via) ?? 0) > 0)) throw new Error(`close (${label}): the service sent no statement to ${via} over the close`);
    }
    watched = { openMs: opened.openMs, clientClosedMs: await clientClosed, ...settling };
  } finally {
    await streams?.stop();
    await service.stop(60_000);
  }
  const [replies, charges] = await Promise.all([
    byCount(
      h,
      `select status || coalesce(' ' || error_code, '') as k, count(*)::int as n from messages
        where user_id = any($1::text[]) and role = 'assistant' group by 1`,
      users,
    ),
    byCount(h, `select status as k, count(*)::int as n from turn_charges where user_id = any($1::text[]) group by 1`, users),
  ]);
  return { label, ...watched, log: readServiceLog(service.log()), replies, charges, sent };
}

function portOf(url: string): number {
  return Number(new URL(url).port || 5432);
}

/** Polls from the close until nothing of `users` is left open, or WATCH_MS. */
async function watch(
  h: Harness,
  users: readonly string[],
  since: number,
): Promise<{ settledMs: number | undefined; leftAt: Map<number, Left>; leftAtEnd: Left }> {
  const leftAt = new Map<number, Left>();
  for (;;) {
    const left = await unsettled(h.stores.pool, users);
    const t = performance.now() - since;
    for (const m of MILESTONES_MS) if (t >= m && !leftAt.has(m)) leftAt.set(m, left);
    const done = left.streaming + left.reserved === 0;
    if (done || t >= WATCH_MS) {
      // Settled before a milestone: nothing is left at it either.
      for (const m of MILESTONES_MS) if (!leftAt.has(m)) leftAt.set(m, left);
      return { settledMs: done ? t : undefined, leftAt, leftAtEnd: left };
    }
    await delay(POLL_MS);
  }
}

async function byCount(h: Harness, sql: string, users: readonly string[]): Promise<Map<string, number>> {
  const r = await h.stores.pool.query<{ k: string; n: number }>(sql, [users]);
  return new Map(r.rows.map((row) => [row.k, row.n]));
}

/** The service's JSON log lines (pino) that tell how the turns' ends were stored. */
function readServiceLog(text: string): ServiceLog {
  let retries = 0;
  let failed = 0;
  let maxRetryInMs = 0;
  const turns = new Set<string>();
  const retryErrors = new Map<string, number>();
  const errors = new Map<string, number>();
  const warnings = new Map<string, number>();
  const add = (m: Map<string, number>, k: string): void => void m.set(k, (m.get(k) ?? 0) + 1);
  for (const line of text.split('\n')) {
    if (!line.startsWith('{') || /^\{"level":[1-3]\d,/.test(line)) continue;
    let entry: { level?: number; msg?: string; turnId?: string; retryInMs?: number; err?: { message?: string } };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    const err = (entry.err?.message ?? 'no error').slice(0, 100);
    if (entry.msg === RETRY_MSG) {
      retries++;
      if (entry.turnId !== undefined) turns.add(entry.turnId);
      maxRetryInMs = Math.max(maxRetryInMs, entry.retryInMs ?? 0);
      add(retryErrors, err);
    }
    if ((entry.level ?? 0) >= ERROR_LEVEL) {
      if (entry.msg === FAILED_MSG) failed++;
      add(errors, `${entry.msg ?? '?'} (${err})`);
    } else if (entry.level === WARN_LEVEL && entry.msg !== RETRY_MSG) add(warnings, `${entry.msg ?? '?'} (${err})`);
  }
  return { retries, retriedTurns: turns.size, retryErrors, maxRetryInMs, failed, errors, warnings };
}
