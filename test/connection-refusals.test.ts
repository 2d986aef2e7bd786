// DESIGN §3: PostgreSQL refusing connections is a dependency refusing: 503 SERVICE_UNAVAILABLE with
// Retry-After, never 500 (issue 41 item 7: `53300 sorry, too many clients already` gave 500 INTERNAL).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { isDatabaseUnavailable } from '../src/db/create-db.ts';
import { STORES, buildTestApp, codeOf, type TestApp } from './helpers/app.ts';

describe('a database that refuses connections (DESIGN §3)', () => {
  test('DESIGN §3: too_many_connections (53300), cannot_connect_now (57P03) and the pool’s connect timeout are a dependency refusing, not an internal error', () => {
    const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'FATAL' });
    assert.ok(isDatabaseUnavailable(pgError('53300', 'sorry, too many clients already')));
    assert.ok(isDatabaseUnavailable(pgError('53300', 'too many connections for role "x"')));
    assert.ok(isDatabaseUnavailable(pgError('57P03', 'the database system is starting up')));
    assert.ok(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect')));
    assert.ok(!isDatabaseUnavailable(pgError('23505', 'duplicate key value violates unique constraint')));
  });

  if (!STORES.databaseUrl || !STORES.redisUrl) {
    test(
      'DESIGN §3: a role at its connection limit → 503',
      { skip: 'needs DATABASE_URL and REDIS_URL (a PostgreSQL role with a connection limit)' },
      () => undefined,
    );
    return;
  }
  const admin = STORES.databaseUrl;
  const name = `conn_limit_${randomBytes(5).toString('hex')}`;
  const asRole = new URL(admin);
  asRole.username = name;
  asRole.password = '';
  asRole.pathname = `/${name}`;
  const superuser = async (text: string) => {
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      return await client.query<{ n: number }>(text);
    } finally {
      await client.end();
    }
  };
  let t: TestApp;
  let held: pg.Client | undefined;
  before(async () => {
    // Not a superuser: connection limits do not apply to superusers.
    await superuser(`create role "${name}" login nosuperuser connection limit 5`);
    await superuser(`create database "${name}" owner "${name}"`);
    t = await buildTestApp({ env: { DATABASE_URL: asRole.toString() } });
  });
  after(async () => {
    await held?.end().catch(() => undefined);
    // Closing drops the test schema on a connection of its own, while the pool's last one may still be exiting.
    await superuser(`alter role "${name}" connection limit -1`);
    await t.close();
    await superuser(`drop database if exists "${name}" with (force)`);
    await superuser(`drop role if exists "${name}"`);
  });

  test('DESIGN §3: the role at its CONNECTION LIMIT 1, held by another connection → each request 503 SERVICE_UNAVAILABLE with Retry-After, never 500', async () => {
    const users = Array.from({ length: 12 }, (_, i) => `refused-${i}`);
    assert.equal((await t.call('GET', '/api/accounts', { user: 'before' })).statusCode, 200);
    await superuser(`alter role "${name}" connection limit 1`);
    await superuser(`select pg_terminate_backend(pid) from pg_stat_activity where usename = '${name}' and pid <> pg_backend_pid()`);
    // The one slot, taken by someone else: connect as soon as the app's old backends are gone.
    for (const deadline = Date.now() + 20_000; held === undefined;) {
      const client = new pg.Client({ connectionString: asRole.toString() });
      try {
        await client.connect();
        held = client;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const answers = await Promise.all(users.map((user) => t.call('GET', '/api/accounts', { user })));
    for (const res of answers) {
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(codeOf(res), 'SERVICE_UNAVAILABLE');
      assert.ok(Number(res.headers['retry-after']) >= 1, String(res.headers['retry-after']));
    }
    assert.ok(
      t.logs.some((l) => l.includes('53300') || /too many connections/.test(l)),
      'the refusals were the role’s connection limit',
    );
    // Once the slot is free again, the service answers.
    await held?.end();
    held = undefined;
    let status = 0;
    for (const deadline = Date.now() + 20_000; status !== 200 && Date.now() < deadline;) {
      status = (await t.call('GET', '/api/accounts', { user: 'after' })).statusCode;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status, 200);
  });
});
