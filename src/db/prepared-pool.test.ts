import { after, before, describe, test } from 'node:test';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { startPgBouncer, type PgBouncer } from '../../test/helpers/pgbouncer.ts';
import { unusedPort } from '../../test/helpers/net.ts';
import { ensureDatabase } from '../../test/helpers/database.ts';
import { createDb, type DbHandle } from './create-db.ts';
import { migrateToLatest } from './migrate.ts';

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
          try {
            const sums = await Promise.all(
              Array.from({ length: 200 }, (_, i) =>
                pooled.db.transaction().execute(async (trx) => {
                  const a = await sql<{ v: number }>`select ${i}::int as v`.execute(trx);
                  const b = await sql<{ v: number }>`select ${i}::int + 1 as v`.execute(trx);
                  return (a.rows[0]?.v ?? 0) + (b.rows[0]?.v ?? 0);
                }),
              ),
            );
            assert.deepEqual(
              sums,
              Array.from({ length: 200 }, (_, i) => 2 * i + 1),
            );
          } finally {
            await pooled.close();
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
