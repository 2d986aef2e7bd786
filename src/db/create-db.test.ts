import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'kysely';
import { createDb, type DbHandle } from './create-db.ts';

// The pool's connections are PostgreSQL sessions (PGlite has none).
const databaseUrl = process.env.DATABASE_URL;

if (!databaseUrl) {
  test('PostgreSQL pool', { skip: 'needs DATABASE_URL: npm run test:pg' }, () => undefined);
} else {
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
      const first = await pid();
      assert.equal(await pid(), first, 'reused while in use');
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
}
