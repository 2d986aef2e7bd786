import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { sql } from 'kysely';
import { TcpProxy } from '../../test/helpers/net.ts';
import pg from 'pg';
import { ensureDatabase } from '../../test/helpers/database.ts';
import { createDb, isDatabaseUnavailable, openUnbounded, type DbHandle } from './create-db.ts';
import { migrateToLatest } from './migrate.ts';

// The pool's connections are PostgreSQL sessions (PGlite has none).
const databaseUrl = process.env.DATABASE_URL;

if (!databaseUrl) {
  test('PostgreSQL pool', { skip: 'needs DATABASE_URL: npm run test:pg' }, () => undefined);
} else {
  // DATABASE_URL may name a database not made yet, as `npm run test:pg` on a fresh server does.
  before(() => ensureDatabase(databaseUrl));

  describe('the PostgreSQL pool (DATABASE_POOL_SIZE, DATABASE_POOL_IDLE_MS)', () => {
    const handles: DbHandle[] = [];
    after(() => Promise.all(handles.map((h) => h.close())));
    const open = async (poolIdleMs: number): Promise<() => Promise<number | undefined>> => {
      const h = await createDb({ databaseUrl, poolSize: 1, poolIdleMs });
      handles.push(h);
      return async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(h.db)).rows[0]?.pid;
    };

    test('a connection unused for the idle time is closed, and the next query opens another', async () => {
      const pid = await open(150);
      // One connection, two queries at once: the second waits for the first's connection, never idle.
      const [first, second] = await Promise.all([pid(), pid()]);
      assert.equal(second, first, 'reused while in use');
      await delay(600);
      assert.notEqual(await pid(), first, 'closed after 150 ms unused');
    });

    test('idle time 0: a connection stays open however long it is unused', async () => {
      const pid = await open(0);
      const first = await pid();
      await delay(600);
      assert.equal(await pid(), first);
    });
  });

  describe('DESIGN §10: PostgreSQL connection and statement timeouts (DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS)', () => {
    const handles: DbHandle[] = [];
    after(() => Promise.all(handles.map((h) => h.close())));
    const open = async (url: string, o: { connectTimeoutMs?: number; statementTimeoutMs?: number }) => {
      const h = await createDb({ databaseUrl: url, poolSize: 2, ...o });
      handles.push(h);
      return h;
    };
    const timed = async (work: Promise<unknown>): Promise<{ ms: number; err: unknown }> => {
      const started = Date.now();
      try {
        await work;
        return { ms: Date.now() - started, err: undefined };
      } catch (err) {
        return { ms: Date.now() - started, err };
      }
    };

    test('DESIGN §10: a statement running past the statement timeout is cancelled, as a database unavailable (503), and the pool goes on', async () => {
      const h = await open(databaseUrl, { statementTimeoutMs: 300 });
      const { ms, err } = await timed(sql`select pg_sleep(5)`.execute(h.db));
      assert.ok(err, 'pg_sleep(5) was not cancelled');
      assert.equal((err as { code?: string }).code, '57014');
      assert.ok(isDatabaseUnavailable(err));
      assert.ok(ms < 2000, `cancelled after ${ms} ms`);
      assert.deepEqual((await sql<{ one: number }>`select 1 as one`.execute(h.db)).rows, [{ one: 1 }]);
    });

    test('DESIGN §10: a database that accepts connections but never answers fails within the connect timeout', async () => {
      const sockets = new Set<Socket>();
      const blackHole: Server = createServer((s) => void sockets.add(s));
      await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
      try {
        const address = blackHole.address();
        if (!address || typeof address === 'string') throw new Error('no port');
        const h = await open(`postgres://postgres@127.0.0.1:${address.port}/test`, { connectTimeoutMs: 400 });
        const { ms, err } = await timed(sql`select 1`.execute(h.db));
        assert.ok(err, 'a query on a silent server succeeded');
        assert.ok(isDatabaseUnavailable(err), String(err));
        assert.ok(ms < 2000, `failed after ${ms} ms`);
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise((resolve) => blackHole.close(resolve));
      }
    });

    test('DESIGN §10: a server that stops answering mid-session fails the query within the statement timeout and a second; its connection is replaced', async () => {
      const direct = new URL(databaseUrl);
      const proxy = new TcpProxy(direct.hostname, Number(direct.port || 5432));
      const port = await proxy.start(0);
      try {
        const url = new URL(databaseUrl);
        url.host = `127.0.0.1:${port}`;
        const h = await open(url.toString(), { statementTimeoutMs: 300, connectTimeoutMs: 400 });
        const pid = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(h.db)).rows[0]?.pid;
        const first = await pid();
        proxy.freeze();
        const { ms, err } = await timed(pid());
        assert.ok(err, 'a query on a frozen server succeeded');
        assert.ok(isDatabaseUnavailable(err), String(err));
        assert.ok(ms < 2500, `failed after ${ms} ms`);
        proxy.thaw();
        const next = await pid();
        assert.ok(next !== undefined && next !== first, 'the connection whose query went unanswered was used again');
      } finally {
        await proxy.stop();
      }
    });

    test('DESIGN §10: migrations run without the statement timeout (they may outlast a request)', async () => {
      const schema = `t_${Math.random().toString(16).slice(2, 10)}`;
      const h = await createDb({ databaseUrl, schema, statementTimeoutMs: 100 });
      handles.push(h);
      await migrateToLatest(h.db);
      const { err } = await timed(sql`select pg_sleep(0.3)`.execute(h.db));
      assert.equal((err as { code?: string } | undefined)?.code, '57014');
      await sql.raw(`drop schema "${schema}" cascade`).execute(h.db);
    });

    test("DESIGN §10: another deployment's schemas created and dropped meanwhile never fail a migration — its introspection reads only its own schema", async () => {
      const schema = `t_${Math.random().toString(16).slice(2, 10)}`;
      const h = await createDb({ databaseUrl, schema });
      handles.push(h);
      const other = new pg.Client({ connectionString: databaseUrl });
      await other.connect();
      let churning = true;
      const churn = (async () => {
        for (let i = 0; churning; i++) {
          const name = `${schema}_other_${i}`;
          await other.query(`create schema "${name}"; create table "${name}".t (a int, b text)`);
          await other.query(`drop schema "${name}" cascade`);
        }
      })();
      const own = openUnbounded(h.db) ?? assert.fail('no migration connection on PostgreSQL');
      try {
        await migrateToLatest(h.db);
        // Kysely's own PostgreSQL introspection failed 13 % of such calls ("schema … does not exist").
        let failures = 0;
        for (let i = 0; i < 400; i++) {
          await own.introspection.getTables({ withInternalKyselyTables: true }).catch(() => failures++);
        }
        assert.equal(failures, 0);
        const tables = await own.introspection.getTables({ withInternalKyselyTables: true });
        assert.deepEqual([...new Set(tables.map((t) => t.schema))], [schema]);
        assert.ok(tables.some((t) => t.name === 'kysely_migration'));
        assert.ok(!(await own.introspection.getTables()).some((t) => t.name === 'kysely_migration'));
      } finally {
        churning = false;
        await churn;
        await other.end();
        await own.destroy();
        await sql.raw(`drop schema "${schema}" cascade`).execute(h.db);
      }
    });
  });
}
