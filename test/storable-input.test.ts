import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { makeStripeEvent } from './fakes/index.ts';
import { buildTestApp, codeOf, type TestApp } from './helpers/app.ts';
import { giveCredits, ledgerCount } from './kits/billing.ts';

const WEBHOOK_SECRET = 'whsec_storable_input_0123456789abcdef';
const WEBHOOK = '/api/billing/webhooks/stripe';

type Res = { statusCode: number; body: string; json<T>(): T };

/**
 * DESIGN §10: text PostgreSQL cannot store as sent (`\u0000`, an unpaired surrogate, bytes that are
 * not UTF-8) is refused, never stored changed; days and instants in parameters are years 1970–9999.
 */
describe('DESIGN §10: input the store cannot hold', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ env: { STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET } });
  });
  after(async () => t.close());

  const newUser = () => `u-${randomUUID()}`;
  const refused = (res: Res, code = 'VALIDATION_ERROR') => {
    assert.equal(res.statusCode, 400, res.body);
    assert.equal(codeOf(res), code);
  };
  const account = (name: string, timezone = 'UTC') => ({ name, currency: 'USD', timezone, startingBalance: '100' });
  const accountNames = async (user: string) => (await t.call('GET', '/api/accounts', { user })).json<{ items: { name: string }[] }>().items.map((a) => a.name);

  /** A JSON body as exact bytes, as a client that sends whatever it likes would. */
  const sendBytes = async (user: string, method: 'POST' | 'PUT', url: string, bytes: Buffer): Promise<Res> => {
    const res = await t.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${await t.token(user)}`, 'content-type': 'application/json' },
      payload: bytes,
    });
    return { statusCode: res.statusCode, body: res.body, json: <T>() => JSON.parse(res.body) as T };
  };
  /** `json` with `marker` replaced by raw bytes. */
  const withBytes = (json: string, marker: string, bytes: number[]): Buffer => {
    const at = json.indexOf(marker);
    assert.ok(at >= 0);
    return Buffer.concat([Buffer.from(json.slice(0, at)), Buffer.from(bytes), Buffer.from(json.slice(at + marker.length))]);
  };

  describe('text in requests', () => {
    test('DESIGN §10: \\u0000 or a lone surrogate in a JSON body field → 400 VALIDATION_ERROR, nothing stored (not a name taken by its U+FFFD twin)', async () => {
      const u = newUser();
      assert.equal((await t.call('POST', '/api/accounts', { user: u, body: account('Main \uFFFD') })).statusCode, 201);
      refused(await t.call('POST', '/api/accounts', { user: u, body: account('Main\u0000') }));
      // JSON.stringify would escape the surrogate the same way; written out to show what is on the wire.
      const lone = '{"name":"Main \\ud800","currency":"USD","timezone":"UTC","startingBalance":"1"}';
      refused(await t.call('POST', '/api/accounts', { user: u, body: lone, headers: { 'content-type': 'application/json' } }));
      refused(await t.call('POST', '/api/brokerages', { user: u, body: '{"name":"\\udc00IBKR"}', headers: { 'content-type': 'application/json' } }));
      assert.deepEqual(await accountNames(u), ['Main \uFFFD']);
      assert.deepEqual((await t.call('GET', '/api/brokerages', { user: u })).json(), { items: [] });
    });

    test('DESIGN §10: bytes that are not UTF-8 in a JSON body → 400 VALIDATION_ERROR, never stored as U+FFFD', async () => {
      const u = newUser();
      assert.equal((await t.call('POST', '/api/accounts', { user: u, body: account('Main \uFFFD') })).statusCode, 201);
      const json = JSON.stringify(account('Main @@'));
      // 0xFF never occurs in UTF-8; ED A0 80 is a surrogate written as UTF-8; C0 AF an overlong '/'.
      for (const bytes of [[0xff], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe6, 0xa0]]) {
        refused(await sendBytes(u, 'POST', '/api/accounts', withBytes(json, '@@', bytes)));
      }
      refused(await sendBytes(u, 'POST', '/api/brokerages', withBytes('{"name":"IBKR @@"}', '@@', [0xfe])));
      assert.deepEqual(await accountNames(u), ['Main \uFFFD']);
      assert.deepEqual((await t.call('GET', '/api/brokerages', { user: u })).json(), { items: [] });
    });

    test('DESIGN §10: bytes that are not UTF-8 in a stream message body → 400 VALIDATION_ERROR before anything else is looked at; nothing stored', async () => {
      const u = newUser();
      const json = JSON.stringify({ text: 'Was my entry @@ too early?', clientMessageId: randomUUID() });
      // Without a provider key a readable body would be 409 PROVIDER_KEY_NOT_CONFIGURED.
      refused(await sendBytes(u, 'POST', '/api/advisor/conversations/new/messages/stream', withBytes(json, '@@', [0xff])));
      assert.deepEqual((await t.call('GET', '/api/advisor/conversations', { user: u })).json(), { items: [], nextCursor: null });
    });

    test('DESIGN §10: a query or path parameter whose escapes are not UTF-8 (%FF, a surrogate %ED%A0%80) or hold %00 → 400 VALIDATION_ERROR', async () => {
      const u = newUser();
      // A route that reads no query: the escape is refused all the same, not kept as the text "%FF".
      refused(await t.call('GET', '/api/billing/wallet?note=%FF', { user: u }));
      refused(await t.call('GET', '/api/billing/wallet?note=%ED%A0%80', { user: u }));
      refused(await t.call('GET', '/api/advisor/conversations?cursor=%ED%A0%80', { user: u }));
      refused(await t.call('GET', '/api/advisor/usage?groupBy=day%00', { user: u }));
      refused(await t.call('GET', '/api/accounts/%ED%A0%80', { user: u }));
      refused(await t.call('GET', '/api/accounts/%FF/trading-day', { user: u }));
      refused(await t.call('GET', '/api/accounts/%00', { user: u }));
    });

    test('DESIGN §10: well-formed non-ASCII text (emoji, CJK, accents) is stored and read back exactly, in a body, its bytes and a query', async () => {
      const u = newUser();
      const name = '株式 📈 Ünïcödé';
      const created = await t.call('POST', '/api/accounts', { user: u, body: account(name) });
      assert.equal(created.statusCode, 201, created.body);
      assert.equal(created.json<{ name: string }>().name, name);
      const brokerage = await sendBytes(u, 'POST', '/api/brokerages', Buffer.from(JSON.stringify({ name: '証券会社 🏦' }), 'utf8'));
      assert.equal(brokerage.statusCode, 201, brokerage.body);
      assert.deepEqual(await accountNames(u), [name]);
      assert.deepEqual(
        (await t.call('GET', '/api/brokerages', { user: u })).json<{ items: { name: string }[] }>().items.map((b) => b.name),
        ['証券会社 🏦'],
      );
      assert.equal((await t.call('GET', '/api/billing/wallet?note=%F0%9F%93%88%E6%A0%AA', { user: u })).statusCode, 200);
    });
  });

  describe('the Stripe webhook', () => {
    /** Stripe's own test signature (stripe-node) over a body written as text. */
    const deliver = (payload: string, header = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET })) =>
      deliverBytes(Buffer.from(payload), header);
    /** A signature over the exact bytes, as Stripe signs a body (`<t>.<body>`, HMAC-SHA256). */
    const signBytes = (bytes: Buffer): string => {
      const timestamp = Math.floor(Date.now() / 1000);
      return `t=${timestamp},v1=${createHmac('sha256', WEBHOOK_SECRET).update(`${timestamp}.`).update(bytes).digest('hex')}`;
    };
    const deliverBytes = (bytes: Buffer, header = signBytes(bytes)) =>
      t.app.inject({
        method: 'POST',
        url: WEBHOOK,
        headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': header },
        payload: bytes,
      });
    const completed = (userId: string, sessionId = `cs_test_${randomUUID()}`) =>
      makeStripeEvent('checkout.session.completed', {
        id: sessionId,
        object: 'checkout.session',
        payment_status: 'paid',
        client_reference_id: userId,
        metadata: { userId, credits: '100', packId: 'p100' },
      });
    const credits = async (user: string) => (await t.call('GET', '/api/billing/wallet', { user })).json<{ credits: number }>().credits;
    const usersLike = async (prefix: string) => (await t.deps.db.selectFrom('users').select('id').where('id', 'like', `${prefix}%`).execute()).map((r) => r.id);
    const allLedgerEntries = async () => (await t.deps.db.selectFrom('ledger_entries').select('seq').execute()).length;
    const acknowledged = (res: { statusCode: number; body: string }) => {
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(JSON.parse(res.body), { received: true });
    };
    /** The user a lone surrogate or a bad byte would collapse into: the same id with U+FFFD, holding 50 credits. */
    const twin = async () => {
      const prefix = `u-${randomUUID()}-`;
      const user = `${prefix}\uFFFD`;
      await giveCredits(t, user, 50);
      return { prefix, user };
    };
    const assertTwinUntouched = async (tw: { prefix: string; user: string }) => {
      assert.equal(await credits(tw.user), 50);
      assert.equal(await ledgerCount(t, tw.user), 1);
      assert.deepEqual(await usersLike(tw.prefix), [tw.user]);
    };

    test('DESIGN §10: a validly signed event with a lone surrogate in metadata.userId → 200, logged, nothing written (no credits to its U+FFFD twin, no user created)', async () => {
      const tw = await twin();
      const entries = await allLedgerEntries();
      const logged = t.logs.length;
      const payload = JSON.stringify(completed(`${tw.prefix}\ud800`));
      assert.match(payload, /\\ud800/);
      acknowledged(await deliver(payload));
      await assertTwinUntouched(tw);
      assert.equal(await allLedgerEntries(), entries);
      const warning = t.logs
        .slice(logged)
        .map((l) => JSON.parse(l) as { level: number; msg: string })
        .find((l) => /not readable/.test(l.msg));
      assert.equal(warning?.level, 40, 'logged as a warning');
    });

    test('DESIGN §10: a validly signed event with \\u0000 in an id (the session id, the event id) → 200, nothing written, never 500', async () => {
      const u = newUser();
      const entries = await allLedgerEntries();
      acknowledged(await deliver(JSON.stringify(completed(u, `cs_test_${randomUUID()}\u0000`))));
      acknowledged(await deliver(JSON.stringify({ ...completed(u), id: `evt_\u0000${randomUUID()}` })));
      assert.equal(await allLedgerEntries(), entries);
      assert.deepEqual(await usersLike(u), []);
    });

    test('DESIGN §10: a validly signed event whose bytes are not UTF-8 (0xFF in metadata.userId) → 200, nothing written; the signature covers those exact bytes', async () => {
      const tw = await twin();
      const entries = await allLedgerEntries();
      const bytes = withBytes(JSON.stringify(completed(`${tw.prefix}@@`)), '@@', [0xff]);
      // Signed over what the bytes would read as (U+FFFD), not over the bytes: not Stripe's signature.
      const overDecodedText = Stripe.webhooks.generateTestHeaderString({ payload: bytes.toString('utf8'), secret: WEBHOOK_SECRET });
      const forged = await deliverBytes(bytes, overDecodedText);
      assert.equal(forged.statusCode, 400, forged.body);
      assert.equal(codeOf(forged), 'INVALID_SIGNATURE');
      acknowledged(await deliverBytes(bytes));
      await assertTwinUntouched(tw);
      assert.equal(await allLedgerEntries(), entries);
    });

    test('DESIGN §10 with §8: the signature is checked first — a bad signature over an event holding \\u0000 is 400 INVALID_SIGNATURE', async () => {
      const payload = JSON.stringify(completed(newUser(), `cs_test_\u0000`));
      const res = await deliver(payload, Stripe.webhooks.generateTestHeaderString({ payload, secret: 'whsec_someone_else' }));
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(codeOf(res), 'INVALID_SIGNATURE');
    });

    test('DESIGN §10: a signed event naming a user in emoji and CJK text is credited to exactly that user', async () => {
      const u = `u-${randomUUID()}-株式📈`;
      acknowledged(await deliverBytes(Buffer.from(JSON.stringify(completed(u)), 'utf8')));
      assert.equal(await credits(u), 100);
      assert.deepEqual(await usersLike(u), [u]);
    });
  });

  describe('days and instants in parameters', () => {
    const tradingDay = async (user: string, id: string, at: string) => t.call('GET', `/api/accounts/${id}/trading-day?at=${encodeURIComponent(at)}`, { user });
    const newAccount = async (user: string, timezone: string) => {
      const res = await t.call('POST', '/api/accounts', { user, body: account(`A ${timezone}`, timezone) });
      assert.equal(res.statusCode, 201, res.body);
      return res.json<{ id: string }>().id;
    };
    const dayOf = (res: Res) => {
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ tradingDay: string }>().tradingDay;
    };

    test('DESIGN §10: GET /api/advisor/usage with a day outside 1970–9999 (to=0000-12-31, from=1969-12-31, to=10000-01-01) → 400 VALIDATION_ERROR, never 500', async () => {
      const u = newUser();
      for (const query of [
        'to=0000-12-31',
        'from=0000-01-01&to=0000-12-31',
        'from=1969-12-31&to=1970-01-01',
        'to=10000-01-01',
        'from=0999-01-01&to=0999-01-02',
      ]) {
        refused(await t.call('GET', `/api/advisor/usage?${query}`, { user: u }));
      }
    });

    test('DESIGN §10: GET /api/advisor/usage at the bounds (1970-01-01, 9999-12-31) → 200, every day written with four digits', async () => {
      const u = newUser();
      for (const [from, to] of [
        ['1970-01-01', '1970-01-03'],
        ['9999-12-29', '9999-12-31'],
      ] as const) {
        const res = await t.call('GET', `/api/advisor/usage?from=${from}&to=${to}`, { user: u });
        assert.equal(res.statusCode, 200, res.body);
        const body = res.json<{ from: string; to: string; rows: { key: string }[] }>();
        assert.deepEqual([body.from, body.to], [from, to]);
        assert.equal(body.rows.length, 3);
        for (const row of body.rows) assert.match(row.key, /^\d{4}-\d{2}-\d{2}$/);
      }
    });

    test('DESIGN §10: trading-day at=0000-01-01T00:00:00Z or at=0099-06-01T12:00:00Z → 400 VALIDATION_ERROR (never 500, never "99-06-01")', async () => {
      const u = newUser();
      const id = await newAccount(u, 'Pacific/Kiritimati');
      for (const at of ['0000-01-01T00:00:00Z', '0099-06-01T12:00:00Z', '1969-12-31T23:59:59Z', '1970-01-01T00:30:00+01:00', '10000-01-01T00:00:00Z']) {
        refused(await tradingDay(u, id, at));
      }
    });

    test('DESIGN §10: trading-day of an instant whose UTC year is past 9999 (9999-12-31T20:00:00-05:00), a leap second or an offset without minutes → 400 VALIDATION_ERROR, never 500', async () => {
      const u = newUser();
      const id = await newAccount(u, 'UTC');
      for (const at of ['9999-12-31T20:00:00-05:00', '2016-12-31T23:59:60Z', '2026-01-01T00:00:00+05', '2026-02-30T00:00:00Z']) {
        refused(await tradingDay(u, id, at));
      }
    });

    test('DESIGN §10: Pacific/Kiritimati at 9999-12-31T23:59:59Z (10000-01-01 there) → 400 VALIDATION_ERROR, never "10000-01-01"; the last instant whose day is 9999-12-31 there → 200', async () => {
      const u = newUser();
      const kiritimati = await newAccount(u, 'Pacific/Kiritimati');
      refused(await tradingDay(u, kiritimati, '9999-12-31T23:59:59Z'));
      refused(await tradingDay(u, kiritimati, '9999-12-31T10:00:00Z'));
      assert.equal(dayOf(await tradingDay(u, kiritimati, '9999-12-31T09:59:59Z')), '9999-12-31');
      const utc = await newAccount(u, 'UTC');
      assert.equal(dayOf(await tradingDay(u, utc, '9999-12-31T23:59:59Z')), '9999-12-31');
      assert.equal(dayOf(await tradingDay(u, utc, '9999-12-31T23:59:59.999Z')), '9999-12-31');
      assert.equal(dayOf(await tradingDay(u, utc, '1970-01-01T00:00:00Z')), '1970-01-01');
      assert.equal(dayOf(await tradingDay(u, utc, '2026-03-10T22:00:00+02:00')), '2026-03-10');
    });
  });
});
