import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * Plans kept across a transaction-mode pooler (DATABASE_PREPARED_STATEMENTS=false). A pooler hands
 * a client's consecutive statements to different server connections, so named prepared statements
 * cannot be used, and PostgreSQL would parse and plan every unnamed statement on every call. PL/pgSQL
 * caches the plans of the statements in a function's body in the server backend (custom plans for five
 * calls, then a generic one when it is no worse: the rule of named prepared statements), and the backend
 * outlives the client's transaction. So a data statement run a second time is made, in the background,
 * into a function of the database whose body is that very text, and is called through it from then on:
 * `select * from advisor_q_<hash>($1, …, $n)`, a trivial statement to plan.
 *
 * - The function: `returns table (<a plain run's result columns>)`, body `return query <text>`
 *   (`#variable_conflict use_column`: the result columns are variables that would clash with column
 *   names); a statement answering no columns (an update without `returning`) returns its ROW_COUNT
 *   instead. Its arguments are the types PostgreSQL infers for the text's parameters (PREPARE, read back
 *   from pg_prepared_statements, DEALLOCATE, in one transaction on one connection). The caller gets the
 *   original statement's `command` and row count, so Kysely's numAffectedRows is unchanged.
 * - Named by a hash of the text and of those types, created in the first schema of the search_path
 *   (the connection's own) and called by the search_path. An existing function of that name is used as
 *   it is: instances started later create nothing.
 * - Created on a connection of its own, outside any caller's transaction (a DDL error never aborts a
 *   caller's work); the caller runs plain meanwhile. A creation racing another instance's ("tuple
 *   concurrently updated", a unique violation on pg_proc) is tried again after a later plain run, up
 *   to `ATTEMPTS` times in all; a text whose types cannot be found or whose function PostgreSQL refuses
 *   (a record column, two columns of one name, more than 100 parameters) stays plain for good.
 * - A function whose body no longer fits the schema (a migration changed a result type or dropped a
 *   column: 42804, 42P13, 0A000, 42703 on the call; or it was dropped: 42883) is left: the statement runs
 *   plain and is answered normally, and its function is made again from the new result columns (a new
 *   name when they changed; the old function is dropped). Inside a transaction the error stands (the
 *   transaction is already aborted), as a stale named statement's does.
 * - At most `MAX_STATEMENT_TEXTS` texts per pool; others run plain.
 */
export const MAX_STATEMENT_TEXTS = 500;
export const DATA_STATEMENT = /^\s*(select|insert|update|delete|with)\b/i;

/** Creations of one text, failed ones included, before it stays plain. */
const ATTEMPTS = 3;
/** Plain runs of a text before its function is made: a text run once never gets one. */
const RUNS_BEFORE = 2;
/** PostgreSQL's FUNC_MAX_ARGS. */
const MAX_ARGUMENTS = 100;
const BODY_QUOTE = '$advisor_body$';
const ROW_COUNTED = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);
/** Codes of a call whose function no longer fits the schema, or is gone. */
const OUT_OF_DATE = new Set(['42804', '42P13', '0A000', '42703', '42883']);
/** Codes of a creation worth trying again: a race with another instance, a cancel, a lost connection. */
const TRANSIENT = new Set(['XX000', '23505', '40001', '40P01', '55P03', '57014', '08006', '08003', '57P01']);

type Entry =
  | { kind: 'learning'; runs: number; attempts: number; busy: boolean; previous: string | undefined }
  | { kind: 'ready'; fn: string; call: string; arity: number; command: string; counts: boolean; attempts: number }
  | { kind: 'plain' };

export interface FunctionCache {
  /** `text` answered as the plain statement would answer it, through its function once there is one. */
  run(client: pg.PoolClient, text: string, values: unknown[], inTransaction: boolean): Promise<pg.QueryResult>;
  /** Waits for the creations under way (before the pool ends). */
  settle(): Promise<void>;
}

/** PostgreSQL's SQLSTATE of a failed query; undefined for anything else (a lost connection, a timeout). */
const codeOf = (err: unknown): string | undefined => (err instanceof pg.DatabaseError ? err.code : undefined);
const ident = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export function functionCache(pool: pg.Pool): FunctionCache {
  const entries = new Map<string, Entry>();
  const underWay = new Set<Promise<void>>();

  const entryOf = (text: string): Entry | undefined => {
    let entry = entries.get(text);
    if (entry === undefined && entries.size < MAX_STATEMENT_TEXTS && DATA_STATEMENT.test(text) && !text.includes(';') && !text.includes(BODY_QUOTE)) {
      entry = { kind: 'learning', runs: 0, attempts: 0, busy: false, previous: undefined };
      entries.set(text, entry);
    }
    return entry;
  };

  const create = async (text: string, learning: Extract<Entry, { kind: 'learning' }>, plain: pg.QueryResult): Promise<void> => {
    const attempts = learning.attempts + 1;
    let client: pg.PoolClient | undefined;
    let broken = false;
    try {
      client = await pool.connect();
      const made = await define(client, text, plain, learning.previous);
      entries.set(text, made === undefined ? { kind: 'plain' } : { kind: 'ready', ...made, attempts });
    } catch (err) {
      // A probe left prepared on the session, or a transaction left open: the connection is not reused.
      broken = client !== undefined;
      await client?.query('rollback').catch(() => undefined);
      const code = codeOf(err);
      const again = attempts < ATTEMPTS && (code === undefined || TRANSIENT.has(code));
      entries.set(text, again ? { kind: 'learning', runs: RUNS_BEFORE - 1, attempts, busy: false, previous: learning.previous } : { kind: 'plain' });
    } finally {
      client?.release(broken ? true : undefined);
    }
  };

  return {
    async run(client, text, values, inTransaction) {
      const entry = entryOf(text);
      if (entry?.kind === 'ready' && values.length === entry.arity) {
        try {
          return answer(entry, await client.query(entry.call, values));
        } catch (err) {
          if (!OUT_OF_DATE.has(codeOf(err) ?? '')) throw err;
          // Calls that failed together set it aside once.
          if (entries.get(text) === entry) {
            const again = entry.attempts < ATTEMPTS;
            entries.set(
              text,
              again ? { kind: 'learning', runs: RUNS_BEFORE - 1, attempts: entry.attempts, busy: false, previous: entry.fn } : { kind: 'plain' },
            );
          }
          if (inTransaction) throw err;
        }
      }
      const result = await client.query(text, values);
      const now = entries.get(text);
      if (now?.kind === 'learning' && !now.busy && ++now.runs >= RUNS_BEFORE) {
        now.busy = true;
        const p = create(text, now, result);
        underWay.add(p);
        void p.finally(() => underWay.delete(p));
      }
      return result;
    },
    async settle() {
      while (underWay.size > 0) await Promise.allSettled([...underWay]);
    },
  };
}

/** The original statement's answer from its function's. */
function answer(entry: Extract<Entry, { kind: 'ready' }>, result: pg.QueryResult): pg.QueryResult {
  if (entry.counts) {
    const n = Number((result.rows[0] as Record<string, unknown> | undefined)?.['advisor_row_count'] ?? 0);
    return { ...result, command: entry.command, rowCount: n, rows: [], fields: [] };
  }
  return { ...result, command: entry.command, rowCount: result.rows.length };
}

/**
 * The function of `text` (made now, or found made), in one transaction on `client`; undefined: the
 * text cannot have one (its parameters' types unknown, too many of them, a result without columns).
 */
async function define(
  client: pg.PoolClient,
  text: string,
  plain: pg.QueryResult,
  previous: string | undefined,
): Promise<{ fn: string; call: string; arity: number; command: string; counts: boolean } | undefined> {
  const counts = plain.fields.length === 0;
  if (counts && !ROW_COUNTED.has(plain.command)) return undefined;
  const probe = `advisor_probe_${randomBytes(8).toString('hex')}`;
  await client.query('begin');
  // PREPARE is not undone by a rollback: the probe is deallocated whatever happens, under a name no one else uses.
  await client.query(`prepare ${probe} as ${text}`);
  let types: { params: string[]; results: string[] } | undefined;
  try {
    // A result column's `unknown` is text; a pseudo-type (record, …) cannot be a declared result column.
    const r = await client.query<{ params: string[]; results: string[] }>(
      `select (select parameter_types::text[] from pg_prepared_statements where name = $1) as params,
         array(select case when t = 'unknown'::regtype then 'text' when y.typtype = 'p' then 'pseudo' else format_type(t, null) end
           from unnest($2::oid[]) with ordinality u(t, i) join pg_type y on y.oid = u.t order by i) as results`,
      [probe, plain.fields.map((f) => f.dataTypeID)],
    );
    types = r.rows[0];
  } finally {
    await client.query(`deallocate ${probe}`);
  }
  const params = types?.params ?? [];
  const results = types?.results ?? [];
  if (params.includes('unknown') || params.length > MAX_ARGUMENTS || results.length !== plain.fields.length || results.includes('pseudo')) {
    await client.query('rollback');
    return undefined;
  }
  const columns = plain.fields.map((f, i) => `${ident(f.name)} ${results[i] ?? 'text'}`);
  const signature = counts ? 'bigint' : `table (${columns.join(', ')})`;
  const fn = `advisor_q_${createHash('sha256')
    .update(`${text}\0${params.join(',')}\0${signature}`)
    .digest('hex')
    .slice(0, 24)}`;
  if (previous !== undefined && previous !== fn) await client.query(`drop function if exists ${ident(previous)}`);
  const found = await client.query(
    `select 1 from pg_proc where proname = $1 and pronamespace = (select oid from pg_namespace where nspname = current_schema())`,
    [fn],
  );
  if (found.rows.length === 0) {
    const body = counts
      ? `declare advisor_row_count bigint;\nbegin\n${text};\nget diagnostics advisor_row_count = row_count;\nreturn advisor_row_count;\nend`
      : `begin\nreturn query ${text};\nend`;
    await client.query(
      `create or replace function ${ident(fn)}(${params.join(', ')}) returns ${signature} language plpgsql as ${BODY_QUOTE}\n` +
        `#variable_conflict use_column\n${body}\n${BODY_QUOTE}`,
    );
  }
  await client.query('commit');
  const args = params.map((_, i) => `$${i + 1}`).join(', ');
  const call = counts ? `select ${ident(fn)}(${args}) as advisor_row_count` : `select * from ${ident(fn)}(${args})`;
  return { fn, call, arity: params.length, command: plain.command, counts };
}
