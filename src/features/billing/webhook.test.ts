import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { buildTestApp, codeOf, STORES, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import {
  makeStripeDispute,
  makeStripeEvent,
  makeStripeThinEvent,
  signStripePayload,
  startStripeFake,
  type StripeFake,
  type StripeSession,
} from '../../../test/fakes/index.ts';
import { ConfigError } from '../../config.ts';
import { AppError } from '../../http/errors.ts';
import { billingAlone } from './turn-billing.ts';
import { assertLedgerInvariant, ensureTestUser, ledgerCount, writeTestCatalogue } from '../../../test/kits/billing.ts';

const SECRET = 'whsec_test_0123456789abcdefghijklmnop';
const URL = '/api/billing/webhooks/stripe';

describe('billing: Stripe webhook (DESIGN §8)', () => {
  let t: TestApp;
  let fake: StripeFake;
  const clock = new ManualClock(new Date('2030-03-05T10:00:00Z'));
  let env: Record<string, string>;
  before(async () => {
    fake = await startStripeFake();
    env = { CONFIG_FILE: writeTestCatalogue(), STRIPE_SECRET_KEY: fake.validKey, STRIPE_API_BASE: fake.url, STRIPE_WEBHOOK_SECRET: SECRET };
    t = await buildTestApp({ clock, env });
  });
  after(async () => {
    await t.close();
    await fake.close();
  });

  const nowSeconds = () => Math.floor(clock.now().getTime() / 1000);
  const newUser = () => `u-${randomUUID()}`;

  async function checkout(userId: string, packId = 'p100'): Promise<string> {
    const res = await t.call('POST', '/api/billing/checkout', { user: userId, body: { packId } });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ sessionId: string }>().sessionId;
  }

  /** Delivers an event as Stripe does: the exact bytes it signed, with its Stripe-Signature header. */
  function deliver(event: Record<string, unknown>, o: { secret?: string; timestamp?: number; body?: string; header?: string | null; app?: TestApp } = {}) {
    const payload = JSON.stringify(event);
    const header =
      o.header === null
        ? undefined
        : (o.header ?? Stripe.webhooks.generateTestHeaderString({ payload, secret: o.secret ?? SECRET, timestamp: o.timestamp ?? nowSeconds() }));
    return (o.app ?? t).app.inject({
      method: 'POST',
      url: URL,
      headers: { 'content-type': 'application/json; charset=utf-8', ...(header ? { 'stripe-signature': header } : {}) },
      payload: o.body ?? payload,
    });
  }

  const completed = (session: StripeSession) => makeStripeEvent('checkout.session.completed', session);
  const refundEvent = (session: StripeSession, amountRefunded: number, extra: Record<string, unknown> = {}) =>
    makeStripeEvent('charge.refunded', {
      id: `ch_${String(session['payment_intent']).slice(3)}`,
      object: 'charge',
      amount: session['amount_total'],
      amount_refunded: amountRefunded,
      payment_intent: session['payment_intent'],
      metadata: {},
      ...extra,
    });
  const purchaseStatus = async (sessionId: string) =>
    (await t.deps.db.selectFrom('purchases').select('status').where('session_id', '=', sessionId).executeTakeFirst())?.status;

  describe('happy', () => {
    test('checkout.session.completed with payment_status paid → credits granted once, with the checkout reference', async () => {
      const u = newUser();
      const sessionId = await checkout(u);
      const res = await deliver(completed(fake.completeSession(sessionId)));
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(JSON.parse(res.body), { received: true });
      const ledger = (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { amount: number; kind: string; reference: string }[] }>();
      assert.deepEqual(
        ledger.items.map((i) => [i.amount, i.kind, i.reference]),
        [[100, 'purchase', `checkout:${sessionId}`]],
      );
      assert.equal(await purchaseStatus(sessionId), 'paid');
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });

    test('completed but unpaid (delayed method) grants nothing; async_payment_succeeded then grants once', async () => {
      const u = newUser();
      const sessionId = await checkout(u, 'p1000');
      const unpaid = fake.completeSession(sessionId, 'unpaid');
      assert.equal((await deliver(completed(unpaid))).statusCode, 200);
      assert.equal(await ledgerCount(t, u), 0);
      const paid = fake.completeSession(sessionId, 'paid');
      assert.equal((await deliver(makeStripeEvent('checkout.session.async_payment_succeeded', paid))).statusCode, 200);
      assert.equal((await deliver(completed(paid))).statusCode, 200);
      assert.equal(await assertLedgerInvariant(t, u), 1000);
    });

    test('whatever the order: async_payment_succeeded before completed → credited once', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u));
      assert.equal((await deliver(makeStripeEvent('checkout.session.async_payment_succeeded', session))).statusCode, 200);
      assert.equal((await deliver(completed(session))).statusCode, 200);
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });

    test('the same event 20× concurrently plus a distinct event for the same session (across instances) → credited once', async () => {
      const second = STORES.databaseUrl ? await buildTestApp({ shareWith: t, clock, env }) : t;
      try {
        const u = newUser();
        const session = fake.completeSession(await checkout(u));
        const event = completed(session);
        const other = makeStripeEvent('checkout.session.completed', session);
        const results = await Promise.all([
          ...Array.from({ length: 20 }, (_, i) => deliver(event, { app: i % 2 === 0 ? t : second })),
          deliver(other, { app: second }),
        ]);
        assert.deepEqual(new Set(results.map((r) => r.statusCode)), new Set([200]));
        assert.equal(await ledgerCount(t, u), 1);
        assert.equal(await assertLedgerInvariant(t, u), 100);
      } finally {
        if (second !== t) await second.close();
      }
    });

    test('a session whose purchase row is missing is credited from its metadata', async () => {
      const u = newUser();
      await ensureTestUser(t, u);
      const session = {
        id: `cs_test_${randomUUID().replaceAll('-', '')}`,
        object: 'checkout.session',
        payment_status: 'paid',
        client_reference_id: u,
        metadata: { userId: u, packId: 'p100', credits: '250', purchaseId: randomUUID() },
      };
      assert.equal((await deliver(makeStripeEvent('checkout.session.completed', session))).statusCode, 200);
      assert.equal(await assertLedgerInvariant(t, u), 250);
    });

    test('unknown event types → 200, ignored', async () => {
      const before = await t.deps.db.selectFrom('ledger_entries').select('seq').execute();
      for (const type of ['customer.created', 'payment_intent.succeeded', 'invoice.paid']) {
        const res = await deliver(makeStripeEvent(type, { id: 'x_1', object: 'thing', metadata: { userId: 'u', credits: '5' } }));
        assert.equal(res.statusCode, 200);
      }
      assert.equal((await t.deps.db.selectFrom('ledger_entries').select('seq').execute()).length, before.length);
    });
  });

  describe('refunds', () => {
    test('charge.refunded takes back the refunded share, cumulatively and once per refunded amount', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u, 'p1000'));
      await deliver(completed(session));
      assert.equal((await deliver(refundEvent(session, 2))).statusCode, 200); // 1000 × 2/4000 = 0.5 → rounds half up to 1
      assert.equal(await assertLedgerInvariant(t, u), 999);
      await deliver(refundEvent(session, 1000)); // cumulative share 250
      await deliver(refundEvent(session, 1000));
      assert.equal(await assertLedgerInvariant(t, u), 750);
      await deliver(refundEvent(session, 2)); // an older event arriving late changes nothing
      assert.equal(await assertLedgerInvariant(t, u), 750);
      await Promise.all(Array.from({ length: 10 }, () => deliver(refundEvent(session, 4000))));
      assert.equal(await assertLedgerInvariant(t, u), 0);
      const refs = (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { amount: number; kind: string }[] }>().items;
      assert.deepEqual(
        refs.map((i) => [i.kind, i.amount]),
        [
          ['refund', -750],
          ['refund', -249],
          ['refund', -1],
          ['purchase', 1000],
        ],
      );
    });

    test('a refund after spending → negative balance; the next turn is refused INSUFFICIENT_CREDITS', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u));
      await deliver(completed(session));
      const turn = (model: string) => t.deps.billing.reserve({ turnId: randomUUID(), userId: u, provider: 'openai', model, images: 0 }, billingAlone);
      for (const model of ['cheap-1', 'cheap-1', 'big-1', 'big-1', 'big-1']) await turn(model);
      assert.equal(await assertLedgerInvariant(t, u), 85);
      await deliver(refundEvent(session, 500));
      assert.equal(await assertLedgerInvariant(t, u), -15);
      await assert.rejects(turn('big-1'), (e: unknown) => e instanceof AppError && e.code === 'INSUFFICIENT_CREDITS' && e.status === 402);
      await assert.rejects(turn('cheap-1'), (e: unknown) => e instanceof AppError && e.code === 'ALLOWANCE_EXHAUSTED');
      assert.equal(await assertLedgerInvariant(t, u), -15);
    });

    test('a refund is matched by the charge’s metadata when its payment intent is unknown', async () => {
      const u = newUser();
      const sessionId = await checkout(u);
      const session = fake.completeSession(sessionId);
      await deliver(completed({ ...session, payment_intent: null }));
      const purchaseId = (fake.getSession(sessionId)?.['metadata'] as Record<string, string>)['purchaseId'];
      await deliver(refundEvent(session, 500, { payment_intent: 'pi_unknown', metadata: { purchaseId } }));
      assert.equal(await assertLedgerInvariant(t, u), 0);
    });
  });

  describe('disputes', () => {
    const disputeEvent = (type: 'created' | 'closed', dispute: Record<string, unknown>, status?: string) =>
      makeStripeEvent(`charge.dispute.${type}`, { ...dispute, ...(status ? { status } : {}) });
    const refs = async (u: string) =>
      (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { amount: number; kind: string; reference: string }[] }>().items;

    test('DESIGN §8: charge.dispute.created takes the disputed share back once, however many deliveries; the balance may go negative', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u, 'p1000'));
      await deliver(completed(session));
      for (const model of ['big-1', 'big-1']) {
        await t.deps.billing.reserve({ turnId: randomUUID(), userId: u, provider: 'openai', model, images: 0 }, billingAlone);
      }
      assert.equal(await assertLedgerInvariant(t, u), 990);
      const dispute = makeStripeDispute(session);
      const created = disputeEvent('created', dispute);
      // The same event ten times at once, and a distinct event object for the same dispute.
      const results = await Promise.all([...Array.from({ length: 10 }, () => deliver(created)), deliver(disputeEvent('created', dispute))]);
      assert.deepEqual(new Set(results.map((r) => r.statusCode)), new Set([200]));
      assert.equal(await assertLedgerInvariant(t, u), -10);
      const entry = (await refs(u))[0];
      assert.equal(entry?.amount, -1000);
      assert.equal(entry?.reference, `dispute:${String(dispute['id'])}:taken`);
    });

    test('DESIGN §8: a partial dispute takes back round-half-up of its share; what a refund of the charge took is not taken twice', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u, 'p1000'));
      await deliver(completed(session));
      await deliver(makeStripeEvent('charge.dispute.created', makeStripeDispute(session, { amount: 2 }))); // 1000 × 2/4000 = 0.5 → 1
      assert.equal(await assertLedgerInvariant(t, u), 999);
      const other = newUser();
      const refunded = fake.completeSession(await checkout(other, 'p1000'));
      await deliver(completed(refunded));
      await deliver(refundEvent(refunded, 3000)); // 750 taken by the refund
      await deliver(makeStripeEvent('charge.dispute.created', makeStripeDispute(refunded, { amount: 4000 })));
      assert.equal(await assertLedgerInvariant(t, other), 0);
    });

    test('DESIGN §8: charge.dispute.closed with status won gives the disputed share back once, however many deliveries', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u));
      await deliver(completed(session));
      const dispute = makeStripeDispute(session);
      await deliver(disputeEvent('created', dispute));
      assert.equal(await assertLedgerInvariant(t, u), 0);
      const won = disputeEvent('closed', dispute, 'won');
      await Promise.all(Array.from({ length: 10 }, () => deliver(won)));
      await deliver(disputeEvent('closed', dispute, 'won'));
      await deliver(disputeEvent('created', dispute));
      assert.equal(await assertLedgerInvariant(t, u), 100);
      assert.deepEqual(
        (await refs(u)).map((i) => [i.kind, i.amount, i.reference.split(':')[2]]),
        [
          ['refund', 100, 'won'],
          ['refund', -100, 'taken'],
          ['purchase', 100, undefined],
        ],
      );
    });

    test('DESIGN §8: disputes whatever the order: closed (won) before created nets nothing; closed (lost) keeps the credits taken', async () => {
      const u = newUser();
      const session = fake.completeSession(await checkout(u));
      await deliver(completed(session));
      const first = makeStripeDispute(session, { amount: 250 });
      await deliver(disputeEvent('closed', first, 'won'));
      assert.equal(await assertLedgerInvariant(t, u), 100);
      await deliver(disputeEvent('created', first));
      assert.equal(await assertLedgerInvariant(t, u), 100);
      const second = makeStripeDispute(session, { amount: 250 });
      await deliver(disputeEvent('closed', second, 'lost'));
      await deliver(disputeEvent('created', second));
      await deliver(disputeEvent('closed', second, 'lost'));
      assert.equal(await assertLedgerInvariant(t, u), 50);
      assert.equal(await ledgerCount(t, u), 4);
    });

    test('DESIGN §8: a validly signed event the service cannot parse (thin v2 event, no data.object, not JSON) → 200, logged, nothing written', async () => {
      const before = await t.deps.db.selectFrom('ledger_entries').select('seq').execute();
      const logged = t.logs.length;
      const thin = makeStripeThinEvent();
      const noObject = { ...makeStripeEvent('checkout.session.completed', {}), data: {} };
      for (const event of [thin, noObject]) {
        const res = await deliver(event);
        assert.equal(res.statusCode, 200, res.body);
        assert.deepEqual(JSON.parse(res.body), { received: true });
      }
      const notJson = 'this is not json';
      const res = await deliver({}, { body: notJson, header: signStripePayload(notJson, SECRET, nowSeconds()) });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal((await t.deps.db.selectFrom('ledger_entries').select('seq').execute()).length, before.length);
      const warnings = t.logs.slice(logged).filter((l) => l.includes('not readable'));
      assert.equal(warnings.length, 3);
      assert.ok(warnings[0]?.includes(String(thin['id'])));
    });
  });

  describe('security: nothing is written unless the signature verifies', () => {
    async function refusedDelivery(o: Parameters<typeof deliver>[1]) {
      const u = newUser();
      const sessionId = await checkout(u);
      const res = await deliver(completed(fake.completeSession(sessionId)), o);
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(codeOf({ json: () => JSON.parse(res.body) }), 'INVALID_SIGNATURE');
      assert.equal(await ledgerCount(t, u), 0);
      assert.equal(await purchaseStatus(sessionId), 'pending');
    }

    test('wrong secret → 400 INVALID_SIGNATURE', () => refusedDelivery({ secret: 'whsec_someone_else_entirely_000000' }));
    test('DESIGN §8: timestamp older than 300 s → 400 INVALID_SIGNATURE', () => refusedDelivery({ timestamp: nowSeconds() - 301 }));
    test('DESIGN §8: a correctly signed timestamp 301 s in the future → 400 INVALID_SIGNATURE', () => refusedDelivery({ timestamp: nowSeconds() + 301 }));
    test('DESIGN §8: a correctly signed timestamp an hour in the future → 400 INVALID_SIGNATURE', () => refusedDelivery({ timestamp: nowSeconds() + 3600 }));
    test('DESIGN §8: a header whose later t= is an hour ahead is refused whichever t= the signature check reads', async () => {
      const u = newUser();
      const event = completed(fake.completeSession(await checkout(u)));
      const payload = JSON.stringify(event);
      const ahead = nowSeconds() + 3600;
      const signed = Stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET, timestamp: ahead });
      const res = await deliver(event, { header: `t=${nowSeconds()},${signed}` });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(JSON.parse(res.body).error.code, 'INVALID_SIGNATURE');
      assert.equal(await ledgerCount(t, u), 0);
    });
    test('missing Stripe-Signature → 400 INVALID_SIGNATURE', () => refusedDelivery({ header: null }));
    test('garbage Stripe-Signature → 400 INVALID_SIGNATURE', () => refusedDelivery({ header: 't=abc,v1=zz' }));

    test('re-serialised body (same JSON, other bytes) → 400 INVALID_SIGNATURE', async () => {
      const u = newUser();
      const event = completed(fake.completeSession(await checkout(u)));
      const payload = JSON.stringify(event);
      const res = await deliver(event, { header: signStripePayload(payload, SECRET, nowSeconds()), body: JSON.stringify(event, null, 2) });
      assert.equal(res.statusCode, 400);
      assert.equal(JSON.parse(res.body).error.code, 'INVALID_SIGNATURE');
      assert.equal(await ledgerCount(t, u), 0);
    });

    test('a timestamp exactly 300 s old is still accepted (tolerance boundary)', async () => {
      const u = newUser();
      const res = await deliver(completed(fake.completeSession(await checkout(u))), { timestamp: nowSeconds() - 300 });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });

    test('DESIGN §8: a timestamp exactly 300 s ahead is still accepted (tolerance boundary, either way)', async () => {
      const u = newUser();
      const res = await deliver(completed(fake.completeSession(await checkout(u))), { timestamp: nowSeconds() + 300 });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });
  });

  describe('failures', () => {
    test('a store failure → 5xx so Stripe retries; the retry credits once', async () => {
      const broken = await buildTestApp({ clock, env, ...(STORES.databaseUrl ? { shareWith: t } : {}) });
      const u = newUser();
      const session = fake.completeSession(await checkout(u));
      const event = completed(session);
      await broken.deps.db.destroy();
      try {
        const res = await deliver(event, { app: broken });
        assert.ok(res.statusCode >= 500, `${res.statusCode} ${res.body}`);
        assert.ok(['INTERNAL', 'SERVICE_UNAVAILABLE'].includes(JSON.parse(res.body).error.code));
      } finally {
        await broken.close();
      }
      assert.equal(await ledgerCount(t, u), 0);
      assert.equal((await deliver(event)).statusCode, 200);
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });
  });
});

describe('billing: webhook without STRIPE_WEBHOOK_SECRET', () => {
  test('DESIGN §10: STRIPE_SECRET_KEY without STRIPE_WEBHOOK_SECRET stops the start naming it; with no Stripe at all the webhook → 402 BILLING_NOT_AVAILABLE, nothing written', async () => {
    await assert.rejects(
      buildTestApp({ env: { CONFIG_FILE: writeTestCatalogue(), STRIPE_SECRET_KEY: 'sk_test_0123456789' } }),
      (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.startsWith('STRIPE_WEBHOOK_SECRET must be set')),
    );
    const t = await buildTestApp({ env: { CONFIG_FILE: writeTestCatalogue() } });
    try {
      const payload = JSON.stringify(
        makeStripeEvent('checkout.session.completed', {
          id: 'cs_1',
          object: 'checkout.session',
          payment_status: 'paid',
          metadata: { userId: 'u', credits: '5' },
        }),
      );
      const res = await t.app.inject({
        method: 'POST',
        url: URL,
        headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, SECRET) },
        payload,
      });
      assert.equal(res.statusCode, 402);
      assert.equal(JSON.parse(res.body).error.code, 'BILLING_NOT_AVAILABLE');
      assert.equal((await t.deps.db.selectFrom('ledger_entries').selectAll().execute()).length, 0);
    } finally {
      await t.close();
    }
  });
});
