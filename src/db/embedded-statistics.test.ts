// The embedded database has no autovacuum: the service analyzes what writes changed enough, so the
// planner reads a trades page through its index instead of sorting the whole account.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { buildTestApp, STORES, type TestApp } from '../../test/helpers/app.ts';

describe('statistics of the embedded database', { skip: STORES.databaseUrl !== undefined && 'PostgreSQL analyzes with its own autovacuum' }, () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({});
  });
  after(async () => t.close());

  test('after an import of 2,000 trades the trades table is analyzed, and a page is read newest first through the index, not sorted', async () => {
    const u = `u-${randomUUID()}`;
    const a = (await t.call('POST', '/api/accounts', { user: u, body: { name: 'S', currency: 'USD', timezone: 'Etc/UTC', startingBalance: '1' } })).json<{
      id: string;
    }>().id;
    const rows = Array.from(
      { length: 2000 },
      (_, i) => `A${i % 5},${i % 2 ? 'sell' : 'buy'},1,10,${new Date(Date.UTC(2025, 0, 1) + i * 60_000).toISOString()}`,
    );
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/accounts/${a}/trades/import`,
      headers: { 'content-type': 'text/csv', authorization: `Bearer ${await t.token(u)}` },
      payload: ['symbol,side,quantity,price,executedAt', ...rows].join('\n'),
    });
    assert.equal(res.statusCode, 200, res.body);
    // The check runs after the response; wait for it (it is one statement and an ANALYZE).
    let analyzed = false;
    for (let i = 0; i < 600 && !analyzed; i++) {
      const { rows: stats } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_user_tables
        where relname = 'trades' and last_analyze is not null`.execute(t.deps.db);
      analyzed = (stats[0]?.n ?? 0) > 0;
      if (!analyzed) await sleep(50);
    }
    assert.ok(analyzed, 'trades was analyzed');
    const { rows: plan } = await sql<{ 'QUERY PLAN': string }>`explain select id from trades where account_id = ${a}
      and (executed_at, id) < (${new Date(Date.UTC(2025, 0, 2))}::timestamptz, ${'ffffffff-ffff-ffff-ffff-ffffffffffff'}::uuid)
      order by executed_at desc, id desc limit 200`.execute(t.deps.db);
    const text = plan.map((p) => p['QUERY PLAN']).join('\n');
    assert.match(text, /Index (Only )?Scan Backward/, text);
    assert.doesNotMatch(text, /Sort/, text);
  });
});
