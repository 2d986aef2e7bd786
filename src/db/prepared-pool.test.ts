import { after, before, describe, test } from 'node:test';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql, type Generated, type Kysely, type Transaction } from 'kysely';
import pg from 'pg';
import { startPgBouncer, type PgBouncer } from '../../test/helpers/pgbouncer.ts';
import { unusedPort } from '../../test/helpers/net.ts';
import { ensureDatabase } from '../../test/helpers/database.ts';
import { createDb, type DbHandle } from './create-db.ts';
import { migrateToLatest } from './migrate.ts';
import type { DB } from './types.ts';

// Named prepared statements exist only on a PostgreSQL server (PGlite runs in-process).
const databaseUrl = process.env.DATABASE_URL;

if (!databaseUrl) {
  test('prepared statements (PostgreSQL)', { skip: 'needs DATABASE_URL: npm run test:pg' }, () => undefined);
} else {
  // DATABASE_URL may name a database not made yet, as `npm run test:pg` on a fresh server does.
  before(() => ensureDatabase(databaseUrl));

  describe('prepared statements on PostgreSQL', () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    let h: DbHandle;
    let admin: pg.Client;
    before(async () => {
      // One connection, so every query below runs on the session whose statements it inspects.
      h = await createDb({ databaseUrl, schema, poolSize: 1 });
      admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      await sql`create table notes (id int primary key, body text not null)`.execute(h.db);
      await sql`insert into notes values (1, 'one'), (2, 'two')`.execute(h.db);
    });
    after(async () => {
      await h.close();
      await admin.query(`drop schema "${schema}" cascade`);
      await admin.end();
    });

    const byId = (id: number) => sql<Record<string, unknown>>`select * from notes where id = ${id}`.execute(h.db);
    const preparedNotes = async (): Promise<number> => {
      const r = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements where statement like ${'%from notes where%'}`.execute(h.db);
      return r.rows[0]?.n ?? -1;
    };

    test('a data statement is parsed once per connection and reused with other parameters', async () => {
      assert.deepEqual((await byId(1)).rows, [{ id: 1, body: 'one' }]);
      assert.deepEqual((await byId(2)).rows, [{ id: 2, body: 'two' }]);
      assert.equal(await preparedNotes(), 1);
    });

    test('DDL and transaction control are not prepared', async () => {
      await h.db.transaction().execute(async (trx) => {
        await sql`update notes set body = body where id = ${1}`.execute(trx);
      });
      const r = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(h.db);
      assert.ok(
        r.rows.every((row) => !/^\s*(begin|commit|rollback|create|alter)/i.test(row.statement)),
        JSON.stringify(r.rows),
      );
    });

    test('a schema change by another process: the query is answered (unnamed), and the stale connection is replaced', async () => {
      await byId(1);
      const pid = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(h.db)).rows[0]?.pid;
      const before = await pid();
      await admin.query(`alter table "${schema}".notes add column pinned boolean not null default false`);
      assert.deepEqual((await byId(1)).rows, [{ id: 1, body: 'one', pinned: false }]);
      // The connection holding the stale statement was closed on release; the new one prepares afresh.
      assert.notEqual(await pid(), before, 'a new connection');
      assert.deepEqual((await byId(2)).rows, [{ id: 2, body: 'two', pinned: false }]);
      assert.equal(await preparedNotes(), 1);
    });

    test('a schema change inside a transaction fails that transaction only', async () => {
      await byId(1);
      await admin.query(`alter table "${schema}".notes add column color text`);
      await assert.rejects(
        h.db.transaction().execute(async (trx) => sql`select * from notes where id = ${1}`.execute(trx)),
        /cached plan must not change result type/,
      );
      assert.deepEqual((await byId(1)).rows, [{ id: 1, body: 'one', pinned: false, color: null }]);
    });
    describe('DESIGN §15: DATABASE_PREPARED_STATEMENTS=false (a transaction-mode pooler)', () => {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      let h: DbHandle;
      before(async () => {
        h = await createDb({ databaseUrl, schema, poolSize: 1, statementTimeoutMs: 1234, preparedStatements: false });
        await sql`create table notes (id int primary key, body text not null)`.execute(h.db);
        await sql`insert into notes values (1, 'one')`.execute(h.db);
      });
      after(async () => {
        await sql`drop schema ${sql.id(schema)} cascade`.execute(h.db);
        await h.close();
      });

      test('DESIGN §15: with prepared statements off no statement is named on the session, and its start asks for no statement_timeout', async () => {
        for (let i = 0; i < 7; i++) assert.deepEqual((await sql`select body from notes where id = ${1}`.execute(h.db)).rows, [{ body: 'one' }]);
        const prepared = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(h.db);
        assert.deepEqual(prepared.rows, [{ n: 0 }]);
        const timeout = await sql<{ source: string }>`select source from pg_settings where name = 'statement_timeout'`.execute(h.db);
        assert.notEqual(timeout.rows[0]?.source, 'client', 'statement_timeout is not a startup parameter of the session');
      });
    });

    describe('DESIGN §16: DATABASE_PREPARED_STATEMENTS=false — a statement run more than once is called through a function of the schema', () => {
      const schema = `t_${randomBytes(6).toString('hex')}`;
      type NotesTables = { notes: { id: number; body: string }; note_log: { id: Generated<number>; note_id: number } };
      type Notes = DB & NotesTables;
      let h: DbHandle;
      let db: Kysely<Notes>;
      before(async () => {
        // One connection: the background creation waits for it like any query.
        h = await createDb({ databaseUrl, schema, poolSize: 1, preparedStatements: false });
        db = h.db.withTables<NotesTables>();
        await sql`create table notes (id int primary key, body text not null)`.execute(h.db);
        await sql`create table note_log (id serial primary key, note_id int not null)`.execute(h.db);
        await sql`insert into notes values (1, 'one'), (2, 'two')`.execute(h.db);
      });
      after(async () => {
        await h.close();
        await admin.query(`drop schema "${schema}" cascade`);
      });

      /** The schema's statement functions whose body holds `fragment`. */
      const functionsOf = async (fragment: string): Promise<{ oid: number; proname: string }[]> =>
        (
          await admin.query<{ oid: number; proname: string }>(
            `select p.oid::int as oid, p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
             where n.nspname = $1 and p.proname like 'advisor\\_q\\_%' and strpos(p.prosrc, $2) > 0`,
            [schema, fragment],
          )
        ).rows;
      /**
       * `run` once inside a transaction that counts its function calls (track_functions), repeated until
       * it went through the one function holding `fragment` (its creation runs in the background); `run`
       * plain while there is none.
       */
      const throughFunction = async <T>(fragment: string, run: (d: Kysely<Notes>) => Promise<T>): Promise<{ result: T; fn: string }> => {
        for (let i = 0; i < 200; i++) {
          const [fn] = await functionsOf(fragment);
          if (fn !== undefined) {
            const { result, calls } = await db.transaction().execute(async (trx: Transaction<Notes>) => {
              await sql`set local track_functions = 'pl'`.execute(trx);
              const result = await run(trx);
              const c = await sql<{ n: number }>`select coalesce(pg_stat_get_xact_function_calls(${fn.oid}::oid), 0)::int as n`.execute(trx);
              return { result, calls: c.rows[0]?.n };
            });
            if (calls === 1) return { result, fn: fn.proname };
          } else await run(db);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        throw new Error(`never ran through a function holding ${fragment}`);
      };
      const byId = (d: Kysely<Notes>, id: number) => sql<{ id: number; body: string }>`select id, body from notes where id = ${id}`.execute(d);

      test('DESIGN §16: a data statement run twice is then called through one function of the schema, answering what the plain statement answered', async () => {
        const plain = [(await byId(db, 1)).rows, (await byId(db, 2)).rows];
        assert.deepEqual(plain, [[{ id: 1, body: 'one' }], [{ id: 2, body: 'two' }]]);
        const { result } = await throughFunction('from notes where id = $1', (d) => byId(d, 2));
        assert.deepEqual(result.rows, plain[1]);
        assert.equal((await functionsOf('from notes where id = $1')).length, 1);
        const prepared = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(h.db);
        assert.deepEqual(prepared.rows, [{ n: 0 }], 'the probe of its parameter types was deallocated');
      });

      test('DESIGN §16: through a function, an update and an upsert answer their affected rows (numUpdatedRows, numInsertedOrUpdatedRows)', async () => {
        const touch = (d: Kysely<Notes>) =>
          d
            .updateTable('notes')
            .set({ body: sql<string>`body` })
            .where('id', '<=', 2)
            .executeTakeFirstOrThrow();
        const upsert = (d: Kysely<Notes>, body: string) =>
          d
            .insertInto('notes')
            .values({ id: 3, body })
            .onConflict((oc) => oc.column('id').doUpdateSet({ body: (eb) => eb.ref('excluded.body') }))
            .executeTakeFirstOrThrow();
        assert.equal((await touch(db)).numUpdatedRows, 2n);
        assert.equal((await touch(db)).numUpdatedRows, 2n);
        assert.equal((await throughFunction('update "notes" set "body" = body', touch)).result.numUpdatedRows, 2n);
        assert.equal((await upsert(db, 'three')).numInsertedOrUpdatedRows, 1n);
        assert.equal((await upsert(db, 'three')).numInsertedOrUpdatedRows, 1n);
        assert.equal((await throughFunction('insert into "notes"', (d) => upsert(d, 'drei'))).result.numInsertedOrUpdatedRows, 1n);
        assert.deepEqual((await byId(db, 3)).rows, [{ id: 3, body: 'drei' }]);
      });

      test('DESIGN §16: a data-modifying CTE (update, insert over it, a select over both) runs whole through its function', async () => {
        const logged = (d: Kysely<Notes>) =>
          sql<{ body: string; logged: number }>`with u as (update notes set body = body where id = ${1} returning id, body),
            l as (insert into note_log (note_id) select id from u returning note_id)
            select (select body from u) as body, (select count(*)::int from l) as logged`.execute(d);
        await logged(db);
        await logged(db);
        const { result } = await throughFunction('insert into note_log', logged);
        assert.deepEqual(result.rows, [{ body: 'one', logged: 1 }]);
        const count = async () => (await admin.query<{ n: number }>(`select count(*)::int as n from "${schema}".note_log`)).rows[0]?.n ?? -1;
        const before = await count();
        assert.deepEqual((await logged(db)).rows, [{ body: 'one', logged: 1 }]);
        assert.equal(await count(), before + 1);
      });

      test('DESIGN §16: a text no function can answer for (a record column; two columns of one name) stays plain and is answered as plain', async () => {
        for (let i = 0; i < 6; i++) {
          assert.deepEqual((await sql`select row(id, body) as r from notes where id = ${1}`.execute(h.db)).rows, [{ r: '(1,one)' }]);
          assert.deepEqual((await sql`select n.id, m.id from notes n join notes m on m.id = n.id where n.id = ${2}`.execute(h.db)).rows, [{ id: 2 }]);
        }
        // A statement learnt after them, on the one connection: their creations were tried before it.
        await throughFunction('from notes where id < $1', (d) => sql`select count(*)::int as n from notes where id < ${9}`.execute(d));
        assert.deepEqual(await functionsOf('row(id, body)'), []);
        assert.deepEqual(await functionsOf('join notes m'), []);
      });

      test("DESIGN §16: a migration changing a result column's type after the function was made: answered right, plain, then through a new function", async () => {
        const ordered = (d: Kysely<Notes>) => sql<{ id: number; body: string }>`select id, body from notes where id = ${1} order by id`.execute(d);
        await ordered(db);
        await ordered(db);
        const first = await throughFunction('order by id', ordered);
        assert.deepEqual(first.result.rows, [{ id: 1, body: 'one' }]);
        await admin.query(`alter table "${schema}".notes alter column id type bigint`);
        assert.deepEqual((await ordered(db)).rows, [{ id: 1, body: 'one' }]);
        const second = await throughFunction('order by id', ordered);
        assert.deepEqual(second.result.rows, [{ id: 1, body: 'one' }]);
        assert.notEqual(second.fn, first.fn);
        assert.deepEqual(
          (await functionsOf('order by id')).map((f) => f.proname),
          [second.fn],
          'the function that no longer fits was dropped',
        );
      });

      test('DESIGN §16: four instances (one connection each) learning the same two texts at once: 200 concurrent calls all answered right', async () => {
        await sql`create table counters (id int primary key, n int not null)`.execute(h.db);
        await sql`insert into counters select g, 0 from generate_series(1, 10) g`.execute(h.db);
        await racingInstances(databaseUrl, schema, 'counters');
        assert.equal((await functionsOf('counters')).length, 2, 'one function for each text');
      });
    });

    const pgbouncer = spawnSync('pgbouncer', ['--version']).status === 0;
    describe(
      'DESIGN §15: through PgBouncer 1.18 in transaction mode',
      { skip: pgbouncer ? false : 'pgbouncer is not installed (apt-get install pgbouncer)' },
      () => {
        let bouncer: PgBouncer;
        before(async () => {
          bouncer = await startPgBouncer(databaseUrl);
        });
        after(() => bouncer.stop());
        const through = (): string => `${bouncer.url}${new URL(databaseUrl).pathname.slice(1)}`;

        test('DESIGN §15: with prepared statements off, 200 concurrent transactions of two statements each over 4 connections all commit', async () => {
          const pooled = await createDb({ databaseUrl: through(), poolSize: 4, preparedStatements: false });
          // Texts of this run's own: their statement functions, made in the shared database's public schema, are dropped after.
          const v = `v_${randomBytes(5).toString('hex')}`;
          try {
            const sums = await Promise.all(
              Array.from({ length: 200 }, (_, i) =>
                pooled.db.transaction().execute(async (trx) => {
                  const a = await sql<Record<string, number>>`select ${i}::int as ${sql.id(v)}`.execute(trx);
                  const b = await sql<Record<string, number>>`select ${i}::int + 1 as ${sql.id(v)}`.execute(trx);
                  return (a.rows[0]?.[v] ?? 0) + (b.rows[0]?.[v] ?? 0);
                }),
              ),
            );
            assert.deepEqual(
              sums,
              Array.from({ length: 200 }, (_, i) => 2 * i + 1),
            );
          } finally {
            await pooled.close();
            for (const f of await statementFunctions(admin, v)) await admin.query(`drop function public."${f}"`);
          }
        });

        test('DESIGN §16: through PgBouncer, four instances learning the same two texts at once: 200 concurrent calls all answered right, each text then through its function', async () => {
          const table = `counters_${randomBytes(5).toString('hex')}`;
          await admin.query(`create table public.${table} (id int primary key, n int not null)`);
          try {
            await admin.query(`insert into public.${table} select g, 0 from generate_series(1, 10) g`);
            await racingInstances(through(), undefined, table);
            const made = await statementFunctions(admin, table);
            assert.equal(made.length, 2, 'one function for each text');
          } finally {
            for (const f of await statementFunctions(admin, table)) await admin.query(`drop function public."${f}"`);
            await admin.query(`drop table public.${table}`);
          }
        });

        test("DESIGN §15: migrations through PgBouncer take their session lock on DATABASE_LISTEN_URL's own connection to PostgreSQL (a refused one fails them), and then apply", async () => {
          const name = `advisor_pooler_${randomBytes(5).toString('hex')}`;
          const admin = new pg.Client({ connectionString: databaseUrl });
          await admin.connect();
          await admin.query(`create database ${name}`);
          try {
            const direct = new URL(databaseUrl);
            direct.pathname = `/${name}`;
            const pooled = `${bouncer.url}${name}`;
            const nowhere = new URL(direct);
            nowhere.port = String(await unusedPort());
            const refused = await createDb({ databaseUrl: pooled, preparedStatements: false, sessionUrl: nowhere.toString() });
            try {
              await assert.rejects(migrateToLatest(refused.db), /ECONNREFUSED/);
            } finally {
              await refused.close();
            }
            const h = await createDb({ databaseUrl: pooled, preparedStatements: false, sessionUrl: direct.toString() });
            try {
              await migrateToLatest(h.db);
              const tables = await sql<{
                n: number;
              }>`select count(*)::int as n from information_schema.tables where table_name in ('wallets', 'stream_frames')`.execute(h.db);
              assert.deepEqual(tables.rows, [{ n: 2 }]);
            } finally {
              await h.close();
            }
          } finally {
            await admin.query(`drop database if exists ${name} with (force)`);
            await admin.end();
          }
        });

        test('DESIGN §15: with prepared statements on (the default), PgBouncer refuses the session: its statement_timeout startup parameter', async () => {
          const named = await createDb({ databaseUrl: through(), poolSize: 1 });
          try {
            await assert.rejects(sql`select 1`.execute(named.db), /unsupported startup parameter: statement_timeout/);
          } finally {
            await named.close();
          }
        });
      },
    );
  });
}

/**
 * Four instances (createDb, one connection each) take 200 concurrent calls of two texts on `table`
 * (id 1–10, n 0): a select and an update, each learnt, and its function made, by all four at once.
 * Every call is answered right and every update counted once; the instances close only when their
 * creations are done.
 */
async function racingInstances(url: string, schema: string | undefined, table: string): Promise<void> {
  const instances = await Promise.all(
    Array.from({ length: 4 }, () => createDb({ databaseUrl: url, poolSize: 1, preparedStatements: false, ...(schema ? { schema } : {}) })),
  );
  try {
    const answers = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const db = instances[i % 4]?.db;
        if (db === undefined) throw new Error('no instance');
        const id = (i % 10) + 1;
        const read = await sql<{ id: number }>`select id from ${sql.table(table)} where id = ${id}`.execute(db);
        const bump = await sql`update ${sql.table(table)} set n = n + 1 where id = ${id}`.execute(db);
        return { id: read.rows[0]?.id, updated: bump.numAffectedRows };
      }),
    );
    assert.deepEqual(
      answers,
      Array.from({ length: 200 }, (_, i) => ({ id: (i % 10) + 1, updated: 1n })),
    );
    const first = instances[0];
    if (first === undefined) throw new Error('no instance');
    const counts = await sql<{ n: number }>`select n from ${sql.table(table)} order by id`.execute(first.db);
    assert.deepEqual(
      counts.rows.map((r) => r.n),
      Array.from({ length: 10 }, () => 20),
    );
  } finally {
    await Promise.all(instances.map((i) => i.close()));
  }
}

/** The names of the public schema's statement functions whose body holds `fragment` (a name of one test run's own). */
async function statementFunctions(admin: pg.Client, fragment: string): Promise<string[]> {
  const made = await admin.query<{ proname: string }>(
    `select proname from pg_proc where pronamespace = 'public'::regnamespace and proname like 'advisor\\_q\\_%' and strpos(prosrc, $1) > 0`,
    [fragment],
  );
  return made.rows.map((r) => r.proname);
}
