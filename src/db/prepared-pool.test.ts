import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, type DbHandle } from './create-db.ts';

// Named prepared statements exist only on a PostgreSQL server (PGlite runs in-process).
const databaseUrl = process.env.DATABASE_URL;

if (!databaseUrl) {
  test('prepared statements (PostgreSQL)', { skip: 'needs DATABASE_URL: npm run test:pg' }, () => undefined);
} else {
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
      assert.ok(r.rows.every((row) => !/^\s*(begin|commit|rollback|create|alter)/i.test(row.statement)), JSON.stringify(r.rows));
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
  });
}
