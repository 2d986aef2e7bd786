// DESIGN §14 through HTTP: trades (create, idempotent externalId, list, PATCH, DELETE), owner-only,
// the journal route, trading days under a timezone history, and writes racing on one account.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { buildTestApp, codeOf, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import type { JournalDto, TradeDto } from './schemas.ts';

type Json = Record<string, unknown>;

describe('trades and the journal (DESIGN §14)', () => {
  let t: TestApp;
  const clock = new ManualClock(new Date('2026-03-20T15:00:00Z'));
  before(async () => {
    t = await buildTestApp({ clock });
  });
  after(async () => t.close());

  async function account(user: string, body: Json = {}): Promise<string> {
    const res = await t.call('POST', '/api/accounts', {
      user,
      body: { name: `a-${randomUUID()}`, currency: 'usd', timezone: 'America/New_York', startingBalance: '10000', ...body },
    });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<{ id: string }>().id;
  }
  const trade = (extra: Json = {}): Json => ({ symbol: 'aapl', side: 'buy', quantity: '10', price: '187.50', executedAt: '2026-03-19T14:30:00Z', ...extra });
  async function create(user: string, accountId: string, body: Json, status = 201): Promise<TradeDto> {
    const res = await t.call('POST', `/api/accounts/${accountId}/trades`, { user, body });
    assert.equal(res.statusCode, status, res.body);
    return res.json<TradeDto>();
  }
  const count = async (accountId: string): Promise<number> => {
    const r = await sql<{ n: number }>`select count(*)::int as n from trades where account_id = ${accountId}`.execute(t.deps.db);
    return r.rows[0]?.n ?? -1;
  };

  describe('happy', () => {
    test('DESIGN 14: create → 201 Trade: symbol upper case, decimals canonical, fee default "0", tradingDay in the account’s zone', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const res = await create(u, a, trade({ quantity: '10.50', price: '3.0', executedAt: '2026-03-19T02:30:00+00:00', note: 'opening', tags: ['swing'] }));
      assert.equal(typeof res.id, 'string');
      assert.deepEqual(
        { ...res, id: '', createdAt: '' },
        {
          id: '',
          createdAt: '',
          accountId: a,
          symbol: 'AAPL',
          side: 'buy',
          quantity: '10.5',
          price: '3',
          fee: '0',
          // 02:30 UTC is 22:30 the day before in New York.
          executedAt: '2026-03-19T02:30:00.000Z',
          tradingDay: '2026-03-18',
          externalId: null,
          note: 'opening',
          tags: ['swing'],
          assetClass: 'stock',
          multiplier: '1',
          stopPrice: null,
        },
      );
      assert.equal(res.createdAt, clock.now().toISOString());
    });

    test('DESIGN 14: the same create with an externalId again → 200 with the stored trade, nothing added', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const first = await create(u, a, trade({ externalId: 'exec-1', fee: '1.00' }));
      // The same fill written another way (canonical equal, another offset for the same instant, another note): the same trade.
      const again = await create(
        u,
        a,
        trade({ externalId: 'exec-1', fee: '1', quantity: '10.000', executedAt: '2026-03-19T10:30:00-04:00', note: 'retry' }),
        200,
      );
      assert.deepEqual(again, first);
      assert.equal(await count(a), 1);
    });

    test('DESIGN 14: externalIds are per account: the same id on another account is another trade', async () => {
      const u = `u-${randomUUID()}`;
      const [a, b] = [await account(u), await account(u)];
      await create(u, a, trade({ externalId: 'shared' }));
      await create(u, b, trade({ externalId: 'shared', price: '1' }));
      assert.deepEqual([await count(a), await count(b)], [1, 1]);
    });

    test('DESIGN 14: list newest executedAt first, by trading days (inclusive) and symbol, a keyset cursor through every page', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const made: TradeDto[] = [];
      for (let i = 0; i < 7; i++) {
        made.push(await create(u, a, trade({ symbol: i % 2 === 0 ? 'msft' : 'aapl', executedAt: `2026-03-1${i}T15:00:00Z` })));
      }
      const all = (await t.call('GET', `/api/accounts/${a}/trades`, { user: u })).json<{ items: TradeDto[]; nextCursor: string | null }>();
      assert.deepEqual(
        all.items.map((x) => x.id),
        made.map((x) => x.id).reverse(),
      );
      assert.equal(all.nextCursor, null);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const q: string = `?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const page = (await t.call('GET', `/api/accounts/${a}/trades${q}`, { user: u })).json<{ items: TradeDto[]; nextCursor: string | null }>();
        assert.ok(page.items.length <= 3);
        seen.push(...page.items.map((x) => x.id));
        cursor = page.nextCursor;
      } while (cursor !== null);
      assert.deepEqual(
        seen,
        all.items.map((x) => x.id),
      );
      const filtered = (await t.call('GET', `/api/accounts/${a}/trades?from=2026-03-11&to=2026-03-14&symbol=MSFT`, { user: u })).json<{ items: TradeDto[] }>();
      assert.deepEqual(
        filtered.items.map((x) => x.tradingDay),
        ['2026-03-14', '2026-03-12'],
      );
    });

    test('DESIGN 14: PATCH changes the note and the tags only → 200; note null clears it', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const tr = await create(u, a, trade({ note: 'first' }));
      const res = await t.call('PATCH', `/api/accounts/${a}/trades/${tr.id}`, { user: u, body: { note: 'better entry', tags: ['a', 'b'] } });
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), { ...tr, note: 'better entry', tags: ['a', 'b'] });
      const cleared = await t.call('PATCH', `/api/accounts/${a}/trades/${tr.id}`, { user: u, body: { note: null } });
      assert.deepEqual(cleared.json(), { ...tr, note: null, tags: ['a', 'b'] });
    });

    test('DESIGN 14: DELETE → 204; the trade is gone and the journal no longer counts it', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const buy = await create(u, a, trade());
      const sell = await create(u, a, trade({ side: 'sell', price: '190', executedAt: '2026-03-19T15:00:00Z' }));
      const before = (await t.call('GET', `/api/accounts/${a}/journal?from=2026-03-19&to=2026-03-19`, { user: u })).json<JournalDto>();
      assert.equal(before.totals.realizedPnl, '25');
      const res = await t.call('DELETE', `/api/accounts/${a}/trades/${buy.id}`, { user: u });
      assert.equal(res.statusCode, 204);
      assert.equal(res.body, '');
      const j = (await t.call('GET', `/api/accounts/${a}/journal?from=2026-03-19&to=2026-03-19`, { user: u })).json<JournalDto>();
      assert.deepEqual(
        [j.totals.realizedPnl, j.days[0]?.fills, j.openPositions],
        ['0', 1, [{ symbol: 'AAPL', quantity: '-10', averagePrice: '190', openedAt: sell.executedAt }]],
      );
      const gone = await t.call('DELETE', `/api/accounts/${a}/trades/${buy.id}`, { user: u });
      assert.deepEqual([gone.statusCode, codeOf(gone)], [404, 'NOT_FOUND']);
    });

    test('DESIGN 14: deleting an account deletes its trades (and what the journal keeps of them)', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, trade());
      await create(u, a, trade({ side: 'sell', quantity: '4' }));
      assert.equal(await count(a), 2);
      assert.equal((await t.call('DELETE', `/api/accounts/${a}`, { user: u })).statusCode, 204);
      assert.equal(await count(a), 0);
      for (const table of ['trade_days', 'trade_books'] as const) {
        const r = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} where account_id = ${a}`.execute(t.deps.db);
        assert.equal(r.rows[0]?.n, 0, table);
      }
    });

    test('DESIGN 14 + §9: a timezone change never moves an earlier trade to another day; later trades take the new zone', async () => {
      const u = `u-${randomUUID()}`;
      try {
        clock.set(new Date('2026-03-10T12:00:00Z'));
        const a = await account(u, { timezone: 'Asia/Tokyo' });
        clock.set(new Date('2026-03-10T20:40:00Z'));
        // 20:00 UTC: the 11th in Tokyo, the 10th in New York.
        const early = await create(u, a, trade({ executedAt: '2026-03-10T20:00:00Z' }));
        assert.equal(early.tradingDay, '2026-03-11');
        clock.set(new Date('2026-03-10T21:00:00Z'));
        assert.equal((await t.call('PUT', `/api/accounts/${a}`, { user: u, body: { timezone: 'America/New_York' } })).statusCode, 200);
        clock.set(new Date('2026-03-11T01:00:00Z'));
        const later = await create(u, a, trade({ side: 'sell', price: '190', executedAt: '2026-03-10T22:00:00Z' }));
        assert.equal(later.tradingDay, '2026-03-10');
        // A fill back-dated to before the change is dated in the zone in force at its instant.
        const backDated = await create(u, a, trade({ executedAt: '2026-03-10T20:30:00Z' }));
        assert.equal(backDated.tradingDay, '2026-03-11');
        const listed = (await t.call('GET', `/api/accounts/${a}/trades`, { user: u })).json<{ items: TradeDto[] }>();
        assert.deepEqual(
          listed.items.map((x) => [x.id, x.tradingDay]),
          [
            [later.id, '2026-03-10'],
            [backDated.id, '2026-03-11'],
            [early.id, '2026-03-11'],
          ],
        );
        const j = (await t.call('GET', `/api/accounts/${a}/journal?from=2026-03-10&to=2026-03-11`, { user: u })).json<JournalDto>();
        assert.deepEqual(
          j.days.map((d) => [d.tradingDay, d.fills, d.realizedPnl]),
          [
            ['2026-03-10', 1, '25'],
            ['2026-03-11', 2, '0'],
          ],
        );
      } finally {
        clock.set(new Date('2026-03-20T15:00:00Z'));
      }
    });

    test('DESIGN 14: the journal route: defaults to the last 30 trading days up to today in the account’s zone', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, trade({ executedAt: '2026-03-20T03:00:00Z' }));
      const res = await t.call('GET', `/api/accounts/${a}/journal`, { user: u });
      assert.equal(res.statusCode, 200, res.body);
      const j = res.json<JournalDto>();
      // 15:00 UTC on the 20th is the 20th in New York; the trade at 03:00 UTC is the 19th there.
      assert.deepEqual(
        [j.from, j.to, j.currency, j.accountId, j.days.map((d) => d.tradingDay), j.balance],
        ['2026-02-19', '2026-03-20', 'USD', a, ['2026-03-19'], '10000'],
      );
    });
  });

  describe('errors', () => {
    test('DESIGN 14: same externalId with other fields → 409 TRADE_EXTERNAL_ID_REUSED, nothing added', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      await create(u, a, trade({ externalId: 'exec-9' }));
      for (const change of [
        { price: '187.51' },
        { quantity: '11' },
        { side: 'sell' },
        { symbol: 'MSFT' },
        { fee: '0.01' },
        { executedAt: '2026-03-19T14:30:01Z' },
      ]) {
        const res = await t.call('POST', `/api/accounts/${a}/trades`, { user: u, body: trade({ externalId: 'exec-9', ...change }) });
        assert.deepEqual([res.statusCode, codeOf(res)], [409, 'TRADE_EXTERNAL_ID_REUSED'], JSON.stringify(change));
      }
      assert.equal(await count(a), 1);
    });

    test('DESIGN 14: bad fields → 400 VALIDATION_ERROR naming the field; nothing written', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const cases: [Json, string][] = [
        [{ quantity: '0' }, '/quantity'],
        [{ quantity: '0.000' }, '/quantity'],
        [{ quantity: '-1' }, '/quantity'],
        [{ quantity: 10 }, '/quantity'],
        [{ price: 187.5 }, '/price'],
        [{ price: '1e3' }, '/price'],
        [{ price: '1234567890123' }, '/price'],
        [{ fee: '0.123456789' }, '/fee'],
        [{ fee: '-0.5' }, '/fee'],
        [{ symbol: 'BAD SYMBOL' }, '/symbol'],
        [{ symbol: 'X'.repeat(25) }, '/symbol'],
        [{ side: 'long' }, '/side'],
        [{ executedAt: '2026-03-19' }, '/executedAt'],
        [{ executedAt: '2026-03-19T14:30:00' }, '/executedAt'],
        [{ executedAt: '1969-12-31T23:59:59Z' }, '/executedAt'],
        [{ executedAt: '2026-03-20T15:05:01Z' }, '/executedAt'],
        [{ externalId: 'x'.repeat(129) }, '/externalId'],
        [{ note: 'n'.repeat(2001) }, '/note'],
        [{ tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }, '/tags'],
        [{ tags: [''] }, '/tags'],
        [{ tags: ['x'.repeat(33)] }, '/tags'],
        [{ tags: ['a', 'a'] }, '/tags'],
        [{ tradingDay: '2026-03-19' }, '/tradingDay'],
      ];
      for (const [change, path] of cases) {
        const res = await t.call('POST', `/api/accounts/${a}/trades`, { user: u, body: trade(change) });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], JSON.stringify(change));
        const details = res.json<{ error: { details: { path: string }[] } }>().error.details;
        assert.ok(
          details.some((d) => d.path.startsWith(path)),
          `${JSON.stringify(change)} → ${JSON.stringify(details)}`,
        );
      }
      assert.equal(await count(a), 0);
      // Five minutes ahead is still accepted (clock skew), the largest decimals too.
      await create(u, a, trade({ executedAt: '2026-03-20T15:05:00Z', quantity: '999999999999.99999999', price: '0', fee: '0.00000001' }));
    });

    test('DESIGN 14: PATCH of anything but note and tags → 400 VALIDATION_ERROR, nothing changed', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const tr = await create(u, a, trade({ note: 'keep' }));
      for (const body of [
        { price: '1' },
        { note: 'x', quantity: '2' },
        { symbol: 'MSFT' },
        { executedAt: '2026-03-18T00:00:00Z' },
        { tags: 'a' },
        { note: 'n'.repeat(2001) },
      ]) {
        const res = await t.call('PATCH', `/api/accounts/${a}/trades/${tr.id}`, { user: u, body });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], JSON.stringify(body));
      }
      const list = (await t.call('GET', `/api/accounts/${a}/trades`, { user: u })).json<{ items: TradeDto[] }>();
      assert.deepEqual(list.items, [tr]);
    });

    test('DESIGN 14 + §2: another user’s account → 404 ACCOUNT_NOT_FOUND on every journal route; another account’s trade → 404 NOT_FOUND', async () => {
      const owner = `u-${randomUUID()}`;
      const theirs = await account(owner);
      const theirTrade = await create(owner, theirs, trade());
      const u = `u-${randomUUID()}`;
      const mine = await account(u);
      for (const id of [theirs, randomUUID()]) {
        const calls: [method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, headers?: Record<string, string>][] = [
          ['POST', `/api/accounts/${id}/trades`, trade()],
          ['GET', `/api/accounts/${id}/trades`],
          ['PATCH', `/api/accounts/${id}/trades/${theirTrade.id}`, { note: 'mine now' }],
          ['DELETE', `/api/accounts/${id}/trades/${theirTrade.id}`],
          ['GET', `/api/accounts/${id}/trades/export`],
          ['GET', `/api/accounts/${id}/journal`],
          [
            'POST',
            `/api/accounts/${id}/trades/import`,
            'symbol,side,quantity,price,executedAt\nAAPL,B,1,1,2026-03-19T10:00:00Z\n',
            { 'content-type': 'text/csv' },
          ],
        ];
        for (const [method, url, body, headers] of calls) {
          const res = await t.call(method, url, { user: u, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });
          assert.deepEqual([res.statusCode, codeOf(res)], [404, 'ACCOUNT_NOT_FOUND'], `${method} ${url}: ${res.body}`);
        }
      }
      for (const method of ['PATCH', 'DELETE'] as const) {
        const res = await t.call(method, `/api/accounts/${mine}/trades/${theirTrade.id}`, { user: u, ...(method === 'PATCH' ? { body: { note: 'x' } } : {}) });
        assert.deepEqual([res.statusCode, codeOf(res)], [404, 'NOT_FOUND'], method);
      }
      assert.equal(await count(theirs), 1);
      assert.equal(await count(mine), 0);
    });

    test('DESIGN 14: a journal range over three years, `from` after `to`, a bad day, or a cursor the service did not make → 400 VALIDATION_ERROR', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      // Three years apart (1,096 days, a leap day included) is the widest range.
      assert.equal((await t.call('GET', `/api/accounts/${a}/journal?from=2023-03-20&to=2026-03-20`, { user: u })).statusCode, 200);
      for (const q of ['from=2023-03-19&to=2026-03-20', 'from=2026-03-21&to=2026-03-20', 'from=2026-02-30', 'to=10000-01-01', 'from=1969-12-31', 'extra=1']) {
        const res = await t.call('GET', `/api/accounts/${a}/journal?${q}`, { user: u });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], q);
      }
      for (const q of ['cursor=nope', 'limit=0', 'limit=201', 'from=2026-03-02&to=2026-03-01', 'symbol=BAD%20SYMBOL']) {
        const res = await t.call('GET', `/api/accounts/${a}/trades?${q}`, { user: u });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], q);
      }
    });
  });

  describe('concurrency', () => {
    test('DESIGN 14: 30 concurrent creates with one externalId → exactly one trade: one 201, the rest 200 with it', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const results = await Promise.all(
        Array.from({ length: 30 }, () => t.call('POST', `/api/accounts/${a}/trades`, { user: u, body: trade({ externalId: 'race' }) })),
      );
      assert.deepEqual(results.map((r) => r.statusCode).sort(), [...Array<number>(29).fill(200), 201]);
      assert.equal(new Set(results.map((r) => r.json<TradeDto>().id)).size, 1);
      assert.equal(await count(a), 1);
    });

    test('DESIGN 14: concurrent creates of different trades on one account all count in the journal (writes apply one after another)', async () => {
      const u = `u-${randomUUID()}`;
      const a = await account(u);
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          t.call('POST', `/api/accounts/${a}/trades`, {
            user: u,
            body: trade({
              side: i % 2 === 0 ? 'buy' : 'sell',
              price: i % 2 === 0 ? '100' : '101',
              executedAt: `2026-03-19T14:${String(i).padStart(2, '0')}:00Z`,
            }),
          }),
        ),
      );
      assert.ok(results.every((r) => r.statusCode === 201));
      const j = (await t.call('GET', `/api/accounts/${a}/journal?from=2026-03-19&to=2026-03-19`, { user: u })).json<JournalDto>();
      assert.deepEqual([j.days[0]?.fills, j.totals.roundTrips, j.totals.realizedPnl, j.openPositions], [40, 20, '200', []]);
    });
  });
});
