import path from 'node:path';
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { lockDataDir } from '../platform/data-dir-lock.ts';
import { OwnSchemaPostgresDialect } from './own-schema-dialect.ts';
import { PGliteDialect } from './pglite-dialect.ts';
import { preparedStatementPool } from './prepared-pool.ts';
import type { DB, Db } from './types.ts';

const INT8 = 20;

export interface DbHandle {
  readonly db: Db;
  readonly kind: 'postgres' | 'pglite';
  close(): Promise<void>;
}

export type PgliteStart = Pick<PGliteOptions, 'loadDataDir' | 'pgliteWasmModule' | 'initdbWasmModule' | 'fsBundle' | 'startParams'>;

export interface CreateDbOptions {
  /** PostgreSQL connection string; unset = embedded PGlite. */
  readonly databaseUrl?: string | undefined;
  /** PGlite data directory; 'memory://' for a throwaway database. */
  readonly pgliteDir?: string;
  /**
   * Where an embedded database starts from instead of an empty cluster: a data directory dump
   * (`loadDataDir`), compiled modules and start parameters. The tests start every embedded database from one migrated
   * dump (test/helpers/pglite-template.ts) rather than running initdb and every migration again.
   */
  readonly pgliteStart?: PgliteStart;
  /** Isolates a test run inside its own schema of a shared PostgreSQL database. */
  readonly schema?: string;
  /** Connections held at most (default 20). */
  readonly poolSize?: number;
  /**
   * How long an unused connection stays open (default 5 min; 0 = until the pool closes). pg's own
   * default, 10 s, closes connections between bursts of load and opens them again in the next burst:
   * each reopen forks a backend, warms its caches and prepares the statements again, and requests
   * wait for it.
   */
  readonly poolIdleMs?: number;
  /** How long opening a connection, or waiting for a free one of a full pool, may take (default 5 s). */
  readonly connectTimeoutMs?: number;
  /**
   * How long one statement may run (default 10 s): PostgreSQL cancels it (`statement_timeout`), and a
   * server that stopped answering altogether is given up on a second later (pg's `query_timeout`),
   * its connection discarded. Migrations run without it (`openUnbounded`).
   */
  readonly statementTimeoutMs?: number;
  /**
   * DESIGN §15 (default true). False behind a transaction-mode pooler (PgBouncer, Supavisor, RDS
   * Proxy), where consecutive statements of one client may run on different server connections: every
   * statement goes unnamed, and the connection asks for no session setting at its start (a pooler
   * refuses `statement_timeout` as a startup parameter). The statement deadline is then the client's
   * alone (`statementTimeoutMs`; the connection is discarded past it); a server-side bound is the
   * role's or the pooler's to set.
   */
  readonly preparedStatements?: boolean;
  /**
   * With `preparedStatements` false (default true): a data statement run more than once is called
   * through a function of the database holding it, whose plans the server keeps across the pooler's
   * transactions (function-cache.ts). False only to measure what it saves (the bench's baseline).
   */
  readonly statementFunctions?: boolean | undefined;
  /**
   * Where the migrations' connection goes (DATABASE_LISTEN_URL; default `databaseUrl`): the migrator's
   * lock is a session lock (Kysely's `pg_advisory_lock`), which a transaction-mode pooler would let
   * go — or hand to another client — between two statements, so it must reach PostgreSQL directly.
   */
  readonly sessionUrl?: string | undefined;
  readonly onPoolError?: (err: Error) => void;
  /** The seconds each wait for a pooled connection took. */
  readonly onPoolWait?: (seconds: number) => void;
}

/** Client-side grace after the server-side statement timeout, for a server too frozen to enforce it. */
const UNANSWERED_GRACE_MS = 1000;

const unbounded = new WeakMap<Db, () => Db>();

/**
 * The same PostgreSQL database on a connection of its own (to `sessionUrl`: past any pooler) without
 * the statement deadlines, for work that may rightly outlast a request's statement: migrations, and
 * waiting for another instance's. Its
 * introspection sees only the session's own schema (OwnSchemaPostgresDialect), so another schema
 * dropped meanwhile cannot fail a migration. Undefined for PGlite (no deadlines there, one schema).
 * The caller destroys it.
 */
export function openUnbounded(db: Db): Db | undefined {
  return unbounded.get(db)?.();
}

export async function createDb(opts: CreateDbOptions): Promise<DbHandle> {
  if (opts.databaseUrl) {
    // Credits and counters are int8; they stay far below 2^53, so numbers are safe and simpler.
    const types = {
      getTypeParser: (oid: number, format?: string) => (oid === INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')),
    };
    if (opts.schema) {
      const admin = new pg.Client({ connectionString: opts.databaseUrl });
      await admin.connect();
      await admin.query(`create schema if not exists "${opts.schema}"`);
      await admin.end();
    }
    const databaseUrl = opts.databaseUrl;
    const connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
    const statementTimeoutMs = opts.statementTimeoutMs ?? 10_000;
    const session = {
      connectionString: databaseUrl,
      connectionTimeoutMillis: connectTimeoutMs,
      types,
      ...(opts.schema ? { options: `-c search_path="${opts.schema}"` } : {}),
    };
    const named = opts.preparedStatements ?? true;
    const pool = new pg.Pool({
      ...session,
      max: opts.poolSize ?? 20,
      idleTimeoutMillis: opts.poolIdleMs ?? 300_000,
      ...(named ? { statement_timeout: statementTimeoutMs, query_timeout: statementTimeoutMs + UNANSWERED_GRACE_MS } : { query_timeout: statementTimeoutMs }),
    });
    // An idle client whose backend is terminated emits 'error' on the pool; unhandled, it would
    // crash the process. The pool drops that client and the next query gets a fresh one.
    pool.on('error', (err) => opts.onPoolError?.(err));
    // A client that is checked out has no pool listener: a connection cut or a backend terminated
    // while a query or transaction holds it emits 'error' on the client itself, which, unhandled,
    // crashes the process. The query in flight fails on its own (→ 503), the next one on that client
    // is refused, and the pool discards the client on release; so this listener only has to exist.
    pool.on('connect', (client) => client.on('error', () => undefined));
    const wrapped = preparedStatementPool(pool, { named, functions: opts.statementFunctions, onWait: opts.onPoolWait });
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: wrapped }) });
    const own = { ...session, connectionString: opts.sessionUrl ?? databaseUrl, max: 1 };
    unbounded.set(db, () => new Kysely<DB>({ dialect: new OwnSchemaPostgresDialect({ pool: new pg.Pool(own) }) }));
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  const dir = opts.pgliteDir ?? 'memory://';
  // DESIGN §10: PGlite serves one process; a second one on the same directory would silently lose
  // writes, so the directory holding it (DATA_DIR) is locked for as long as this handle is open.
  const lock = dir.startsWith('memory://') ? undefined : lockDataDir(path.dirname(dir));
  try {
    const lite = new PGlite(dir, { ...opts.pgliteStart, parsers: { [INT8]: (v: string) => Number(v) } });
    const db = new Kysely<DB>({ dialect: new PGliteDialect(lite) });
    await sql`select 1`.execute(db);
    const close = async (): Promise<void> => {
      try {
        await db.destroy();
      } finally {
        lock?.release();
      }
    };
    return { db, kind: 'pglite', close };
  } catch (err) {
    lock?.release();
    throw err;
  }
}

/** Postgres error code of a failed query, if any. */
export function pgErrorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';

const CONNECTION_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH']);

/**
 * True when an error means the database could not be reached or dropped the connection (as opposed
 * to a query that failed): the request may succeed on a retry, so it is a 503, not a 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const code = pgErrorCode(err);
  if (code !== undefined) {
    // 57014: a statement cancelled, by statement_timeout (a database too slow to answer in time) or an operator.
    // 53300 too_many_connections: the server (max_connections) or the role or database (CONNECTION
    // LIMIT) refused the connection; 57P03 cannot_connect_now: it is starting or shutting down.
    if (code.startsWith('08') || code === '53300' || code === '57014' || code === '57P01' || code === '57P02' || code === '57P03') return true;
    if (CONNECTION_ERRNOS.has(code)) return true;
  }
  const message = err instanceof Error ? err.message : '';
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout/i.test(
    message,
  );
}
