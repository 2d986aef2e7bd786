import type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';
import { DATA_STATEMENT, functionCache, MAX_STATEMENT_TEXTS, type FunctionCache } from './function-cache.ts';

/**
 * A pg pool for Kysely whose data statements are named prepared statements: each connection parses
 * and plans a statement text once, and later executions only bind and execute it (PostgreSQL
 * switches to a generic plan after five runs when that plan is no worse). Kysely sends every query
 * through the unnamed statement, which PostgreSQL parses and plans again on every call; on this
 * service's short queries that was as much server time as the execution itself.
 *
 * - Only single data statements are named (select, insert, update, delete, with …); DDL and
 *   transaction control stay unnamed. At most `MAX_NAMED` distinct texts are named per pool; texts
 *   beyond it (a query shape that varies, like `in ($1, $2, …)` lists) run unnamed.
 * - A schema change made by another process (a deploy running a migration) can invalidate a
 *   statement a connection prepared earlier: PostgreSQL refuses it with "cached plan must not change
 *   result type". Outside a transaction the query is run again unnamed and answered normally;
 *   inside one the error stands (the transaction is already aborted). Either way the connection is
 *   discarded when it is released, so the pool replaces it with one holding no stale statements.
 * - Statement names live on the server per connection: a transaction-mode pooler that moves
 *   statements between server connections (PgBouncer before 1.21) does not support them. With
 *   `named: false` (DATABASE_PREPARED_STATEMENTS=false) every statement goes unnamed, and a data
 *   statement run more than once is called through a function of the database holding it, whose plan
 *   the server backend keeps (function-cache.ts; `functions: false` turns that off, for the bench's
 *   baseline); the pool still discards a connection whose query went unanswered.
 */

const isStalePlan = (err: unknown): boolean =>
  err instanceof Error && (err as { code?: unknown }).code === '0A000' && /cached plan must not change result type/.test(err.message);

/** `onWait`: the seconds each checkout of a connection took (DESIGN §16, db_pool_wait_seconds). */
export function preparedStatementPool(
  pool: pg.Pool,
  opts: { named: boolean; functions?: boolean | undefined; onWait?: ((seconds: number) => void) | undefined },
): PostgresPool {
  const functions = !opts.named && opts.functions !== false ? functionCache(pool) : undefined;
  const names = new Map<string, string>();
  const nameOf = (text: string): string | undefined => {
    let name = names.get(text);
    if (name === undefined && opts.named && names.size < MAX_STATEMENT_TEXTS && DATA_STATEMENT.test(text) && !text.includes(';')) {
      name = `k${names.size + 1}`;
      names.set(text, name);
    }
    return name;
  };
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  return {
    async connect() {
      const started = performance.now();
      const client = await pool.connect();
      opts.onWait?.((performance.now() - started) / 1000);
      let wrapper = wrappers.get(client);
      if (wrapper === undefined) {
        wrapper = wrap(client, nameOf, functions);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: async () => {
      await functions?.settle();
      await pool.end();
    },
  };
}

function wrap(client: pg.PoolClient, nameOf: (text: string) => string | undefined, functions: FunctionCache | undefined): PostgresPoolClient {
  let inTransaction = false;
  let stale = false;
  let unanswered = false;
  const query = async <R>(text: string, values: readonly unknown[]): Promise<PostgresQueryResult<R>> => {
    try {
      return await run<R>(text, values);
    } catch (err) {
      // The server never answered within query_timeout: the query may still be in flight on this
      // connection, and anything sent after it would queue behind it.
      if (err instanceof Error && err.message === 'Query read timeout') unanswered = true;
      throw err;
    }
  };
  const run = async <R>(text: string, values: readonly unknown[]): Promise<PostgresQueryResult<R>> => {
    // Kysely's streaming queries pass a cursor object; this service does not stream rows.
    if (typeof text !== 'string') throw new Error('cursor queries are not supported by this pool');
    const verb = /^\s*(begin|start|commit|rollback|end)\b/i.exec(text)?.[1]?.toLowerCase();
    if (verb !== undefined) inTransaction = verb === 'begin' || verb === 'start';
    if (functions !== undefined) return (await functions.run(client, text, values as unknown[], inTransaction)) as unknown as PostgresQueryResult<R>;
    const name = stale ? undefined : nameOf(text);
    if (name === undefined) return (await client.query(text, values as unknown[])) as unknown as PostgresQueryResult<R>;
    try {
      return (await client.query({ name, text, values: values as unknown[] })) as unknown as PostgresQueryResult<R>;
    } catch (err) {
      if (!isStalePlan(err)) throw err;
      stale = true;
      if (inTransaction) throw err;
      return (await client.query(text, values as unknown[])) as unknown as PostgresQueryResult<R>;
    }
  };
  return {
    query: query as PostgresPoolClient['query'],
    // A connection holding a stale statement, or an unanswered query, is closed rather than returned to the pool.
    release: () => client.release(stale || unanswered ? true : undefined),
  };
}
