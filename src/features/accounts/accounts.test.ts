import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, codeOf, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';

type Account = { id: string; name: string; currency: string; timezone: string; brokerageId: string | null; startingBalance: string; updatedAt: string };

const base = { name: 'Main', currency: 'usd', timezone: 'America/New_York', startingBalance: '10000.50' };

describe('accounts', () => {
  let t: TestApp;
  const clock = new ManualClock(new Date('2026-03-01T12:00:00Z'));
  before(async () => {
    t = await buildTestApp({ clock });
  });
  after(async () => t.close());

  async function create(user: string, body: Record<string, unknown> = {}): Promise<Account> {
    const res = await t.call('POST', '/api/accounts', { user, body: { ...base, name: `acct-${randomUUID()}`, ...body } });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<Account>();
  }

  describe('happy', () => {
    test('DESIGN §9: create → 201 with currency upper-cased and startingBalance a decimal string', async () => {
      const res = await t.call('POST', '/api/accounts', { user: 'u-happy', body: { ...base, name: '  Swing  ' } });
      assert.equal(res.statusCode, 201);
      const a = res.json<Account>();
      assert.equal(a.name, 'Swing');
      assert.equal(a.currency, 'USD');
      assert.equal(a.startingBalance, '10000.50');
      assert.equal(a.brokerageId, null);
      const list = await t.call('GET', '/api/accounts', { user: 'u-happy' });
      assert.deepEqual(
        list.json<{ items: Account[] }>().items.map((x) => x.id),
        [a.id],
      );
      const got = await t.call('GET', `/api/accounts/${a.id}`, { user: 'u-happy' });
      assert.deepEqual(got.json(), a);
    });

    test('spec 4.4: update any subset of name, currency, brokerageId, timezone', async () => {
      const a = await create('u-upd');
      const b = await t.call('POST', '/api/brokerages', { user: 'u-upd', body: { name: 'IBKR' } });
      assert.equal(b.statusCode, 201);
      const brokerageId = b.json<{ id: string }>().id;
      clock.advance(1000);
      const res = await t.call('PUT', `/api/accounts/${a.id}`, {
        user: 'u-upd',
        body: { name: 'Renamed', currency: 'eur', brokerageId, timezone: 'Europe/Berlin' },
      });
      assert.equal(res.statusCode, 200, res.body);
      const u = res.json<Account>();
      assert.deepEqual([u.name, u.currency, u.brokerageId, u.timezone], ['Renamed', 'EUR', brokerageId, 'Europe/Berlin']);
      assert.equal(u.startingBalance, a.startingBalance);
      assert.ok(u.updatedAt > a.updatedAt);
      const unlinked = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-upd', body: { brokerageId: null } });
      assert.equal(unlinked.json<Account>().brokerageId, null);
    });

    for (const [input, canonical] of [
      ['asia/calcutta', 'Asia/Kolkata'],
      ['Asia/Calcutta', 'Asia/Kolkata'],
      ['Europe/Kiev', 'Europe/Kyiv'],
      ['US/Eastern', 'America/New_York'],
      ['america/new_york', 'America/New_York'],
      ['America/Buenos_Aires', 'America/Argentina/Buenos_Aires'],
    ] as const) {
      test(`DESIGN §9: timezone ${input} is stored as the canonical IANA zone ${canonical}`, async () => {
        const a = await create('u-tz');
        const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-tz', body: { timezone: input } });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.json<Account>().timezone, canonical);
      });
    }

    test('spec 4.4 rule 2: a timezone change applies only from the moment it is made; history is kept', async () => {
      clock.set(new Date('2026-03-10T12:00:00Z'));
      const a = await create('u-day', { timezone: 'Asia/Tokyo' });
      const before = '2026-03-10T20:00:00Z'; // 05:00 on the 11th in Tokyo, 16:00 on the 10th in New York
      clock.set(new Date('2026-03-10T21:00:00Z'));
      const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-day', body: { timezone: 'America/New_York' } });
      assert.equal(res.statusCode, 200);
      const early = await t.call('GET', `/api/accounts/${a.id}/trading-day?at=${before}`, { user: 'u-day' });
      assert.deepEqual(early.json(), { tradingDay: '2026-03-11', timezone: 'Asia/Tokyo' });
      const later = await t.call('GET', `/api/accounts/${a.id}/trading-day?at=2026-03-10T22:00:00Z`, { user: 'u-day' });
      assert.deepEqual(later.json(), { tradingDay: '2026-03-10', timezone: 'America/New_York' });
      const now = await t.call('GET', `/api/accounts/${a.id}/trading-day`, { user: 'u-day' });
      assert.deepEqual(now.json(), { tradingDay: '2026-03-10', timezone: 'America/New_York' });
    });

    test('DESIGN §9: delete → 204, then 404 ACCOUNT_NOT_FOUND', async () => {
      const a = await create('u-del');
      assert.equal((await t.call('DELETE', `/api/accounts/${a.id}`, { user: 'u-del' })).statusCode, 204);
      const res = await t.call('GET', `/api/accounts/${a.id}`, { user: 'u-del' });
      assert.equal(res.statusCode, 404);
      assert.equal(codeOf(res), 'ACCOUNT_NOT_FOUND');
    });

    test('DESIGN §9: deleting a brokerage unlinks its accounts', async () => {
      const b = (await t.call('POST', '/api/brokerages', { user: 'u-bd', body: { name: 'Tasty' } })).json<{ id: string }>();
      const a = await create('u-bd', { brokerageId: b.id });
      assert.equal(a.brokerageId, b.id);
      assert.equal((await t.call('DELETE', `/api/brokerages/${b.id}`, { user: 'u-bd' })).statusCode, 204);
      assert.equal((await t.call('GET', `/api/accounts/${a.id}`, { user: 'u-bd' })).json<Account>().brokerageId, null);
      assert.deepEqual((await t.call('GET', '/api/brokerages', { user: 'u-bd' })).json(), { items: [] });
    });
  });

  describe('errors', () => {
    test('spec 4.4 rule 1: unknown IANA timezone → 400 VALIDATION_ERROR, nothing changed', async () => {
      const a = await create('u-e1');
      for (const tz of ['Mars/Olympus', 'EST5EDT6', 'Asia/Calcuta', '']) {
        const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-e1', body: { timezone: tz, name: 'Changed' } });
        assert.equal(res.statusCode, 400, tz);
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      }
      assert.deepEqual((await t.call('GET', `/api/accounts/${a.id}`, { user: 'u-e1' })).json(), a);
    });

    test('spec 4.4 rule 3: a brokerageId of another user → 403 FORBIDDEN, nothing changed', async () => {
      const theirs = (await t.call('POST', '/api/brokerages', { user: 'u-other', body: { name: 'Theirs' } })).json<{ id: string }>();
      const a = await create('u-e3');
      const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-e3', body: { brokerageId: theirs.id, name: 'X' } });
      assert.equal(res.statusCode, 403);
      assert.equal(codeOf(res), 'FORBIDDEN');
      assert.deepEqual((await t.call('GET', `/api/accounts/${a.id}`, { user: 'u-e3' })).json(), a);
      const created = await t.call('POST', '/api/accounts', { user: 'u-e3', body: { ...base, brokerageId: theirs.id } });
      assert.equal(codeOf(created), 'FORBIDDEN');
    });

    test('DESIGN §2: a brokerageId that does not exist → 404 BROKERAGE_NOT_FOUND', async () => {
      const a = await create('u-e3b');
      const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-e3b', body: { brokerageId: randomUUID() } });
      assert.equal(res.statusCode, 404);
      assert.equal(codeOf(res), 'BROKERAGE_NOT_FOUND');
    });

    test("spec 4.4 rule 4: unknown account, or another user's → 404 ACCOUNT_NOT_FOUND", async () => {
      const theirs = await create('u-owner');
      for (const id of [randomUUID(), theirs.id]) {
        for (const [method, body] of [
          ['GET', undefined],
          ['PUT', { name: 'x' }],
          ['DELETE', undefined],
        ] as const) {
          const res = await t.call(method, `/api/accounts/${id}`, { user: 'u-e4', body });
          assert.equal(res.statusCode, 404, `${method} ${id}`);
          assert.equal(codeOf(res), 'ACCOUNT_NOT_FOUND');
        }
        const day = await t.call('GET', `/api/accounts/${id}/trading-day`, { user: 'u-e4' });
        assert.equal(codeOf(day), 'ACCOUNT_NOT_FOUND');
      }
      assert.equal((await t.call('GET', `/api/accounts/${theirs.id}`, { user: 'u-owner' })).statusCode, 200);
    });

    test('spec 4.4 rule 5: a duplicate name, case-insensitively and after trimming → 409 ACCOUNT_NAME_TAKEN', async () => {
      await create('u-e5', { name: 'Futures' });
      const other = await create('u-e5');
      for (const name of ['Futures', 'futures', '  FUTURES ']) {
        const res = await t.call('PUT', `/api/accounts/${other.id}`, { user: 'u-e5', body: { name } });
        assert.equal(res.statusCode, 409, name);
        assert.equal(codeOf(res), 'ACCOUNT_NAME_TAKEN');
      }
      const dupCreate = await t.call('POST', '/api/accounts', { user: 'u-e5', body: { ...base, name: 'FUTURES' } });
      assert.equal(codeOf(dupCreate), 'ACCOUNT_NAME_TAKEN');
      // Names are per user.
      assert.equal((await t.call('POST', '/api/accounts', { user: 'u-e5-other', body: { ...base, name: 'Futures' } })).statusCode, 201);
      // Renaming an account to its own name in another case is allowed.
      assert.equal((await t.call('PUT', `/api/accounts/${other.id}`, { user: 'u-e5', body: { name: other.name.toUpperCase() } })).statusCode, 200);
    });

    test('spec 4.4 rule 5: 20 concurrent renames of different accounts to one name → exactly one 200, 19 × 409', async () => {
      const accounts = await Promise.all(Array.from({ length: 20 }, () => create('u-race')));
      const results = await Promise.all(accounts.map((a) => t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-race', body: { name: 'The One' } })));
      const statuses = results.map((r) => r.statusCode).sort();
      assert.deepEqual(statuses, [200, ...Array<number>(19).fill(409)]);
      assert.ok(results.filter((r) => r.statusCode === 409).every((r) => codeOf(r) === 'ACCOUNT_NAME_TAKEN'));
      const names = (await t.call('GET', '/api/accounts', { user: 'u-race' })).json<{ items: Account[] }>().items.map((a) => a.name);
      assert.equal(names.filter((n) => n === 'The One').length, 1);
    });

    test('issue 14 item 10: look-alike names (Cyrillic а, NFC/NFD, full-width, zero-width, soft hyphen, case, spaces) → 409 ACCOUNT_NAME_TAKEN on create and rename', async () => {
      const u = `u-look-${randomUUID()}`;
      const main = await create(u, { name: 'Main' });
      const cafe = await create(u, { name: 'Caf\u00e9' });
      const lookAlikes = ['M\u0430in', 'MAIN', '\uff2d\uff41\uff49\uff4e', 'Ma\u200bin', 'M\u00adain', 'Ma\u200din\ufeff', ' main ', 'Μ\u0430\u0456n'];
      for (const name of [...lookAlikes, 'Cafe\u0301', 'CAF\u00c9']) {
        const res = await t.call('POST', '/api/accounts', { user: u, body: { ...base, name } });
        assert.equal(res.statusCode, 409, `create ${JSON.stringify(name)}: ${res.body}`);
        assert.equal(codeOf(res), 'ACCOUNT_NAME_TAKEN');
      }
      for (const name of lookAlikes) {
        const res = await t.call('PUT', `/api/accounts/${cafe.id}`, { user: u, body: { name } });
        assert.equal(res.statusCode, 409, `rename ${JSON.stringify(name)}: ${res.body}`);
        assert.equal(codeOf(res), 'ACCOUNT_NAME_TAKEN');
      }
      // Distinct to a reader: accepted, and shown as typed.
      for (const name of ['Cafe', 'Main 2', 'Mainz']) assert.equal((await create(u, { name })).name, name);
      const renamed = await t.call('PUT', `/api/accounts/${main.id}`, { user: u, body: { name: 'M\u0430IN' } });
      assert.equal(renamed.statusCode, 200, 'an account may take a look-alike of its own name');
      assert.equal(renamed.json<Account>().name, 'M\u0430IN');
      assert.equal((await create(`u-other-${randomUUID()}`, { name: 'Main' })).name, 'Main', 'per user');
    });

    test('issue 14 item 10: a name with no visible character (only zero-width or format characters) → 400 VALIDATION_ERROR', async () => {
      for (const name of ['\u200b', '\u200d\u00ad', ' \u2060 ']) {
        const res = await t.call('POST', '/api/accounts', { user: 'u-invisible', body: { ...base, name } });
        assert.equal(res.statusCode, 400, JSON.stringify(name));
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      }
    });

    test('issue 14 item 10: 20 concurrent renames to look-alike spellings of one name, and 20 concurrent creates → exactly one wins each, the rest 409 ACCOUNT_NAME_TAKEN', async () => {
      const u = `u-look-race-${randomUUID()}`;
      const spellings = [
        'Joint',
        'J\u043eint',
        'JOINT',
        'Jo\u200bint',
        '\uff2a\uff4f\uff49\uff4e\uff54',
        'J\u03bfint',
        'joint ',
        'Jo\u00adint',
        'J\u043e\u0456nt',
        'jOiNt',
      ];
      const accounts = await Promise.all(Array.from({ length: 20 }, () => create(u)));
      const renames = await Promise.all(
        accounts.map((a, i) => t.call('PUT', `/api/accounts/${a.id}`, { user: u, body: { name: spellings[i % spellings.length] } })),
      );
      assert.deepEqual(renames.map((r) => r.statusCode).sort(), [200, ...Array<number>(19).fill(409)]);
      assert.ok(renames.filter((r) => r.statusCode === 409).every((r) => codeOf(r) === 'ACCOUNT_NAME_TAKEN'));
      const creates = await Promise.all(
        spellings.concat(spellings).map((name) => t.call('POST', '/api/accounts', { user: u, body: { ...base, name: `${name} 2` } })),
      );
      assert.deepEqual(creates.map((r) => r.statusCode).sort(), [201, ...Array<number>(19).fill(409)]);
      const names = (await t.call('GET', '/api/accounts', { user: u })).json<{ items: Account[] }>().items.map((a) => a.name);
      assert.equal(names.length, 21);
      assert.equal(names.filter((n) => !n.startsWith('acct-')).length, 2);
    });

    test('spec 4.4: startingBalance, or any unknown field, in an update → 400 VALIDATION_ERROR and nothing changes', async () => {
      const a = await create('u-e6');
      for (const body of [{ startingBalance: '5' }, { name: 'New', startingBalance: '5' }, { nickname: 'x' }, { id: randomUUID() }]) {
        const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-e6', body });
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
        assert.ok(res.json<{ error: { details: unknown[] } }>().error.details.length > 0);
      }
      assert.deepEqual((await t.call('GET', `/api/accounts/${a.id}`, { user: 'u-e6' })).json(), a);
    });

    test('spec 4.4: a malformed account uuid → 400 VALIDATION_ERROR', async () => {
      for (const method of ['GET', 'PUT', 'DELETE'] as const) {
        const res = await t.call(method, '/api/accounts/not-a-uuid', { user: 'u-e7', ...(method === 'PUT' ? { body: { name: 'x' } } : {}) });
        assert.equal(res.statusCode, 400, method);
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      }
    });

    test('DESIGN §9: bad field values → 400 VALIDATION_ERROR naming the field', async () => {
      const a = await create('u-e8');
      const cases: [Record<string, unknown>, string][] = [
        [{ name: '   ' }, '/name'],
        [{ name: 'x'.repeat(101) }, '/name'],
        [{ currency: 'XYZ' }, '/currency'],
        [{ currency: 'dollars' }, '/currency'],
        [{ brokerageId: 'nope' }, '/brokerageId'],
        [{ name: 5 }, '/name'],
      ];
      for (const [body, field] of cases) {
        const res = await t.call('PUT', `/api/accounts/${a.id}`, { user: 'u-e8', body });
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
        const details = res.json<{ error: { details: { path: string }[] } }>().error.details;
        assert.ok(
          details.some((d) => d.path.startsWith(field)),
          `${JSON.stringify(body)} → ${JSON.stringify(details)}`,
        );
      }
      const neg = await t.call('POST', '/api/accounts', { user: 'u-e8', body: { ...base, startingBalance: '-5' } });
      assert.equal(codeOf(neg), 'VALIDATION_ERROR');
      const missing = await t.call('POST', '/api/accounts', { user: 'u-e8', body: { name: 'x' } });
      assert.equal(codeOf(missing), 'VALIDATION_ERROR');
      const badAt = await t.call('GET', `/api/accounts/${a.id}/trading-day?at=yesterday`, { user: 'u-e8' });
      assert.equal(codeOf(badAt), 'VALIDATION_ERROR');
    });

    test("DESIGN §2: another user's brokerage cannot be deleted → 404 BROKERAGE_NOT_FOUND", async () => {
      const b = (await t.call('POST', '/api/brokerages', { user: 'u-b1', body: { name: 'Mine' } })).json<{ id: string }>();
      const res = await t.call('DELETE', `/api/brokerages/${b.id}`, { user: 'u-b2' });
      assert.equal(res.statusCode, 404);
      assert.equal(codeOf(res), 'BROKERAGE_NOT_FOUND');
      assert.equal((await t.call('GET', '/api/brokerages', { user: 'u-b1' })).json<{ items: unknown[] }>().items.length, 1);
    });
  });
});
