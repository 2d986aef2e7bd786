import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { buildTestApp, codeOf, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { makeStripeEvent, signStripePayload, startStripeFake, type StripeFake } from '../../../test/fakes/index.ts';
import { assertLedgerInvariant, giveCredits, ledgerCount, TEST_CATALOGUE, writeTestCatalogue } from '../../../test/kits/billing.ts';

type Ledger = { items: { id: string; amount: number; kind: string; reference: string; createdAt: string }[]; nextCursor: string | null };

describe('billing: checkout, packs, wallet, ledger', () => {
  let t: TestApp;
  let fake: StripeFake;
  const clock = new ManualClock(new Date('2030-06-10T08:00:00Z'));
  const catalogue = writeTestCatalogue();
  before(async () => {
    fake = await startStripeFake();
    t = await buildTestApp({
      clock,
      env: {
        CONFIG_FILE: catalogue,
        STRIPE_SECRET_KEY: fake.validKey,
        STRIPE_WEBHOOK_SECRET: 'whsec_checkout_test',
        STRIPE_API_BASE: fake.url,
        CHECKOUT_SUCCESS_URL: 'https://app.example/ok?session_id={CHECKOUT_SESSION_ID}',
        CHECKOUT_CANCEL_URL: 'https://app.example/no',
        ALLOWED_ORIGINS: 'https://journal.example',
      },
    });
  });
  after(async () => {
    await t.close();
    await fake.close();
  });

  const newUser = () => `u-${randomUUID()}`;
  const purchasesOf = (userId: string) => t.deps.db.selectFrom('purchases').selectAll().where('user_id', '=', userId).execute();

  describe('happy', () => {
    test('spec 4.6: checkout → 200 { url, sessionId }; price, name and credits come from the catalogue; metadata on session and payment intent', async () => {
      const u = newUser();
      const res = await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p1000' } });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json<{ url: string; sessionId: string }>();
      const record = fake.checkouts.at(-1);
      assert.ok(record?.session);
      assert.equal(body.sessionId, record.session.id);
      assert.equal(body.url, record.session['url']);
      const p = record.params as Record<string, unknown>;
      const [purchase] = await purchasesOf(u);
      assert.ok(purchase);
      const metadata = { userId: u, packId: 'p1000', credits: '1000', purchaseId: purchase.id };
      assert.equal(p['mode'], 'payment');
      assert.deepEqual(p['line_items'], [{ quantity: '1', price_data: { currency: 'eur', unit_amount: '4000', product_data: { name: '1,000 credits' } } }]);
      assert.equal(p['client_reference_id'], u);
      assert.deepEqual(p['metadata'], metadata);
      assert.deepEqual(p['payment_intent_data'], { metadata });
      assert.deepEqual([p['success_url'], p['cancel_url']], ['https://app.example/ok?session_id={CHECKOUT_SESSION_ID}', 'https://app.example/no']);
      assert.equal(record.idempotencyKey, `checkout-${purchase.id}`);
      assert.deepEqual(
        [purchase.pack_id, purchase.credits, purchase.amount, purchase.currency, purchase.session_id, purchase.status],
        ['p1000', 1000, 4000, 'eur', body.sessionId, 'pending'],
      );
    });

    test('spec 4.6 rule 2: no wallet write at checkout', async () => {
      const u = newUser();
      assert.equal((await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } })).statusCode, 200);
      assert.equal(await ledgerCount(t, u), 0);
      assert.equal(await assertLedgerInvariant(t, u), 0);
    });

    test('GET /api/billing/packs lists the configured packs', async () => {
      const res = await t.call('GET', '/api/billing/packs', { user: newUser() });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { items: TEST_CATALOGUE.creditPacks });
    });

    test('GET /api/billing/wallet: credits, tier, allowance and image quota with used / remaining / resetsAt', async () => {
      const res = await t.call('GET', '/api/billing/wallet', { user: newUser() });
      assert.equal(res.statusCode, 200);
      const resetsAt = '2030-07-01T00:00:00.000Z';
      assert.deepEqual(res.json(), {
        credits: 0,
        tier: 'free',
        allowance: { limit: 2, used: 0, remaining: 2, resetsAt },
        images: { limit: 3, used: 0, remaining: 3, resetsAt },
      });
    });

    test('GET /api/billing/ledger: newest first, cursor-paginated to the end, only the caller’s entries', async () => {
      const u = newUser();
      for (let i = 1; i <= 7; i++) await giveCredits(t, u, i);
      await giveCredits(t, newUser(), 99);
      const seen: number[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q: string = cursor ? `?limit=3&cursor=${encodeURIComponent(cursor)}` : '?limit=3';
        const res = await t.call('GET', `/api/billing/ledger${q}`, { user: u });
        assert.equal(res.statusCode, 200, res.body);
        const page = res.json<Ledger>();
        seen.push(...page.items.map((i) => i.amount));
        assert.ok(page.items.every((i) => i.kind === 'grant' && i.reference.startsWith('grant:')));
        cursor = page.nextCursor;
        pages += 1;
      } while (cursor !== null);
      assert.deepEqual(seen, [7, 6, 5, 4, 3, 2, 1]);
      assert.equal(pages, 3);
      const all = (await t.call('GET', '/api/billing/ledger', { user: u })).json<Ledger>();
      assert.equal(all.items.length, 7);
      assert.equal(all.nextCursor, null);
      assert.equal(await assertLedgerInvariant(t, u), 28);
    });
  });

  describe('the return and the state of a checkout (issue 29)', () => {
    const checkout = async (u: string, origin?: string) => {
      const res = await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' }, headers: origin === undefined ? {} : { origin } });
      assert.equal(res.statusCode, 200, res.body);
      const params = fake.checkouts.at(-1)?.params as Record<string, unknown>;
      return { sessionId: res.json<{ sessionId: string }>().sessionId, successUrl: params['success_url'], cancelUrl: params['cancel_url'] };
    };
    const deliver = async (event: Record<string, unknown>) => {
      const payload = JSON.stringify(event);
      const signature = signStripePayload(payload, 'whsec_checkout_test', Math.floor(clock.now().getTime() / 1000));
      const res = await t.call('POST', '/api/billing/webhooks/stripe', {
        user: null,
        body: payload,
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      });
      assert.equal(res.statusCode, 200, res.body);
    };
    const pay = (sessionId: string) => deliver(makeStripeEvent('checkout.session.completed', fake.completeSession(sessionId)));
    /** The session as Stripe sends it in `checkout.session.expired`: still unpaid, `status: expired`. */
    const expire = (sessionId: string) => {
      const session = fake.getSession(sessionId);
      assert.ok(session);
      return deliver(makeStripeEvent('checkout.session.expired', { ...session, status: 'expired', url: null }));
    };
    /** A delayed method: completed unpaid, then `checkout.session.async_payment_failed`. */
    const failPayment = async (sessionId: string) => {
      const unpaid = fake.completeSession(sessionId, 'unpaid');
      await deliver(makeStripeEvent('checkout.session.completed', unpaid));
      await deliver(makeStripeEvent('checkout.session.async_payment_failed', unpaid));
    };
    const stateOf = (u: string, sessionId: string) => t.call('GET', `/api/billing/checkout/${sessionId}`, { user: u });

    test('ALLOWED_ORIGINS: a checkout started on an allowed origin returns to that origin (the configured path and query kept, the session placeholder intact)', async () => {
      const r = await checkout(newUser(), 'https://journal.example');
      assert.deepEqual([r.successUrl, r.cancelUrl], ['https://journal.example/ok?session_id={CHECKOUT_SESSION_ID}', 'https://journal.example/no']);
      const own = await checkout(newUser(), 'https://app.example');
      assert.equal(own.successUrl, 'https://app.example/ok?session_id={CHECKOUT_SESSION_ID}');
    });

    test('ALLOWED_ORIGINS: any other origin (or none, or "null") returns to the configured URLs: never an open redirect', async () => {
      for (const origin of ['https://evil.example', 'https://journal.example.evil.example', 'http://journal.example', 'null', undefined]) {
        const r = await checkout(newUser(), origin);
        assert.deepEqual([r.successUrl, r.cancelUrl], ['https://app.example/ok?session_id={CHECKOUT_SESSION_ID}', 'https://app.example/no'], String(origin));
      }
    });

    test('GET /api/billing/checkout/{sessionId}: 200 pending until the webhook credits it, then credited (with when), the pack, credits and price fixed at checkout', async () => {
      const u = newUser();
      const { sessionId } = await checkout(u);
      const pending = await stateOf(u, sessionId);
      assert.equal(pending.statusCode, 200, pending.body);
      assert.deepEqual(pending.json(), {
        sessionId,
        state: 'pending',
        packId: 'p100',
        credits: 100,
        amount: 500,
        currency: 'usd',
        createdAt: clock.now().toISOString(),
        expiresAt: new Date(clock.now().getTime() + 24 * 3_600_000).toISOString(),
        creditedAt: null,
      });
      await pay(sessionId);
      const credited = (await stateOf(u, sessionId)).json<{ state: string; creditedAt: string }>();
      assert.deepEqual([credited.state, credited.creditedAt], ['credited', clock.now().toISOString()]);
      assert.equal(await assertLedgerInvariant(t, u), 100);
      await giveCredits(t, u, 5);
      const ledger = (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { kind: string; amount: number; purchase: unknown }[] }>();
      assert.deepEqual(
        ledger.items.map((e) => [e.kind, e.amount, e.purchase]),
        [
          ['grant', 5, null],
          ['purchase', 100, { packId: 'p100', amount: 500, currency: 'usd' }],
        ],
        'issue 29: a purchase entry names its pack and what was paid',
      );
    });

    test('GET /api/billing/checkout/{sessionId}: expired once 24 h (Stripe’s session lifetime) have passed unpaid; a credit arriving later still shows credited', async () => {
      const u = newUser();
      const { sessionId } = await checkout(u);
      const start = clock.now();
      try {
        clock.advance(24 * 3_600_000 - 1);
        assert.equal((await stateOf(u, sessionId)).json<{ state: string }>().state, 'pending');
        clock.advance(1);
        const expired = await stateOf(u, sessionId);
        assert.equal(expired.statusCode, 200);
        assert.equal(expired.json<{ state: string }>().state, 'expired');
        await pay(sessionId);
        assert.equal((await stateOf(u, sessionId)).json<{ state: string }>().state, 'credited');
      } finally {
        clock.set(start);
      }
    });

    test('DESIGN §8: GET /api/billing/checkout/{sessionId} → expired after checkout.session.expired (well inside the 24 h lifetime), nothing credited', async () => {
      const u = newUser();
      const { sessionId } = await checkout(u);
      await expire(sessionId);
      const res = await stateOf(u, sessionId);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual([res.json<{ state: string }>().state, res.json<{ creditedAt: unknown }>().creditedAt], ['expired', null]);
      await expire(sessionId); // a redelivery changes nothing
      assert.equal((await stateOf(u, sessionId)).json<{ state: string }>().state, 'expired');
      assert.equal(await ledgerCount(t, u), 0);
    });

    test('DESIGN §8: GET /api/billing/checkout/{sessionId} → failed after checkout.session.async_payment_failed, nothing credited', async () => {
      const u = newUser();
      const { sessionId } = await checkout(u);
      await failPayment(sessionId);
      const res = await stateOf(u, sessionId);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json<{ state: string }>().state, 'failed');
      const start = clock.now();
      clock.advance(24 * 3_600_000);
      try {
        assert.equal((await stateOf(u, sessionId)).json<{ state: string }>().state, 'failed', 'a failed payment stays failed past the lifetime');
      } finally {
        clock.set(start);
      }
      assert.equal(await ledgerCount(t, u), 0);
    });

    test('DESIGN §8: a credited checkout stays credited whatever expired or failed event arrives after it; an expired event of a session this service never opened writes nothing', async () => {
      const u = newUser();
      const { sessionId } = await checkout(u);
      await pay(sessionId);
      await expire(sessionId);
      await deliver(makeStripeEvent('checkout.session.async_payment_failed', fake.completeSession(sessionId, 'unpaid')));
      assert.equal((await stateOf(u, sessionId)).json<{ state: string }>().state, 'credited');
      assert.equal(await assertLedgerInvariant(t, u), 100);
      await deliver(makeStripeEvent('checkout.session.expired', { id: 'cs_test_not_ours', object: 'checkout.session', status: 'expired' }));
      assert.equal(await ledgerCount(t, u), 1);
    });

    test('GET /api/billing/checkout/{sessionId}: another user’s session → 404 CHECKOUT_NOT_FOUND, as is one this service never opened', async () => {
      const { sessionId } = await checkout(newUser());
      const foreign = await stateOf(newUser(), sessionId);
      assert.equal(foreign.statusCode, 404);
      assert.equal(codeOf(foreign), 'CHECKOUT_NOT_FOUND');
      const unknown = await stateOf(newUser(), 'cs_test_never_opened');
      assert.equal(unknown.statusCode, 404);
      assert.equal(codeOf(unknown), 'CHECKOUT_NOT_FOUND');
    });

    test('GET /api/billing/checkout/{sessionId}: a malformed session id → 400 VALIDATION_ERROR; no token → 401 UNAUTHENTICATED', async () => {
      const bad = await t.call('GET', `/api/billing/checkout/${encodeURIComponent('cs_x;drop')}`, { user: newUser() });
      assert.equal(bad.statusCode, 400);
      assert.equal(codeOf(bad), 'VALIDATION_ERROR');
      const anonymous = await t.call('GET', '/api/billing/checkout/cs_test_x', { user: null });
      assert.equal(anonymous.statusCode, 401);
      assert.equal(codeOf(anonymous), 'UNAUTHENTICATED');
    });
  });

  describe('errors', () => {
    test('spec 4.6 rule 4: an unknown pack → 400 UNKNOWN_PACK; no processor call, nothing recorded', async () => {
      const u = newUser();
      const before = fake.checkouts.length;
      const res = await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p999' } });
      assert.equal(res.statusCode, 400);
      assert.equal(codeOf(res), 'UNKNOWN_PACK');
      assert.equal(fake.checkouts.length, before);
      assert.deepEqual(await purchasesOf(u), []);
    });

    for (const [name, body] of [
      ['missing packId', {}],
      ['empty packId', { packId: '' }],
      ['numeric packId', { packId: 100 }],
      ['unknown field', { packId: 'p100', credits: 1_000_000 }],
    ] as const) {
      test(`spec 4.6: ${name} → 400 VALIDATION_ERROR`, async () => {
        const res = await t.call('POST', '/api/billing/checkout', { user: newUser(), body });
        assert.equal(res.statusCode, 400);
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      });
    }

    test('a processor failure (5xx through stripe-node’s retries) → 502 PAYMENT_PROVIDER_ERROR, nothing recorded', async () => {
      const u = newUser();
      fake.failNext(500, 3);
      const res = await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } });
      assert.equal(res.statusCode, 502);
      assert.equal(codeOf(res), 'PAYMENT_PROVIDER_ERROR');
      assert.deepEqual(await purchasesOf(u), []);
      assert.equal(await ledgerCount(t, u), 0);
    });

    test('GET /api/billing/ledger: a malformed cursor or limit → 400 VALIDATION_ERROR', async () => {
      const u = newUser();
      const forged = Buffer.from('l1:999999999999999999').toString('base64url');
      for (const q of ['?cursor=nope', `?cursor=${forged}`, '?cursor=bDE6MDE', '?limit=0', '?limit=101', '?limit=abc', '?limit=2.5']) {
        const res = await t.call('GET', `/api/billing/ledger${q}`, { user: u });
        assert.equal(res.statusCode, 400, `${q}: ${res.body}`);
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      }
    });
  });

  describe('limits', () => {
    test('DESIGN §4: 10 checkouts per rolling 60 s, every outcome counted; the 11th → 429 RATE_LIMITED until the oldest leaves the window', async () => {
      const u = newUser();
      const start = clock.now();
      for (let i = 0; i < 10; i++) {
        const body = i % 3 === 0 ? { packId: '' } : i % 3 === 1 ? { packId: 'nope' } : { packId: 'p100' };
        const res = await t.call('POST', '/api/billing/checkout', { user: u, body });
        assert.notEqual(res.statusCode, 429, `request ${i + 1}`);
        clock.advance(1000);
      }
      const limited = await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } });
      assert.equal(limited.statusCode, 429);
      assert.equal(codeOf(limited), 'RATE_LIMITED');
      assert.equal(limited.headers['retry-after'], '50');
      clock.set(new Date(start.getTime() + 59_999));
      assert.equal((await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } })).statusCode, 429);
      clock.set(new Date(start.getTime() + 60_000));
      assert.equal((await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } })).statusCode, 200);
      assert.equal((await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } })).statusCode, 429);
      assert.equal((await t.call('POST', '/api/billing/checkout', { user: newUser(), body: { packId: 'p100' } })).statusCode, 200);
      clock.set(new Date('2030-06-10T08:00:00Z'));
    });
  });
});

describe('billing: checkout without a payment processor', () => {
  test('spec 4.6 rule 3: STRIPE_SECRET_KEY unset → 402 BILLING_NOT_AVAILABLE, nothing recorded', async () => {
    const t = await buildTestApp({ env: { CONFIG_FILE: writeTestCatalogue() } });
    try {
      const u = `u-${randomUUID()}`;
      const res = await t.call('POST', '/api/billing/checkout', { user: u, body: { packId: 'p100' } });
      assert.equal(res.statusCode, 402);
      assert.equal(codeOf(res), 'BILLING_NOT_AVAILABLE');
      assert.equal((await t.deps.db.selectFrom('purchases').selectAll().execute()).length, 0);
      assert.equal((await t.call('GET', '/api/billing/packs', { user: u })).statusCode, 200);
    } finally {
      await t.close();
    }
  });

  test('a key the processor rejects → 502 PAYMENT_PROVIDER_ERROR and the key appears in no response or log line', async () => {
    const fake = await startStripeFake();
    const secret = 'sk_test_wrong_key_0123456789';
    const t = await buildTestApp({
      env: { CONFIG_FILE: writeTestCatalogue(), STRIPE_SECRET_KEY: secret, STRIPE_WEBHOOK_SECRET: 'whsec_checkout_test', STRIPE_API_BASE: fake.url },
    });
    try {
      const res = await t.call('POST', '/api/billing/checkout', { user: 'u-wrong-key', body: { packId: 'p100' } });
      assert.equal(res.statusCode, 502);
      assert.equal(codeOf(res), 'PAYMENT_PROVIDER_ERROR');
      assert.ok(!res.body.includes(secret));
      assert.ok(!t.logs.join('\n').includes(secret));
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
