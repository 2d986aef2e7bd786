// DESIGN §8: the checkout return page shows what the processor decided — expired, or failed — from the
// service's own state of the checkout, in real Chromium against the real service and the Stripe fake.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { makeStripeEvent, signStripePayload } from '../fakes/index.ts';
import { WEBHOOK_SECRET, screenshot, startBed, type Bed } from './harness.ts';

let bed: Bed;
before(async () => {
  bed = await startBed();
});
after(async () => {
  await bed.close();
});

async function deliver(type: string, object: Record<string, unknown>): Promise<void> {
  const payload = JSON.stringify(makeStripeEvent(type, object));
  const res = await fetch(`${bed.origin}/api/billing/webhooks/stripe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, WEBHOOK_SECRET) },
    body: payload,
  });
  assert.equal(res.status, 200, await res.text());
}

describe('DESIGN §8: the checkout return page after the processor closed the checkout unpaid', () => {
  for (const outcome of ['expired', 'failed'] as const) {
    test(`DESIGN §8: checkout.session.${outcome === 'expired' ? 'expired' : 'async_payment_failed'} → the return page says ${outcome}`, async () => {
      const { page, context } = await bed.signedIn(`co-${outcome}`);
      await page.getByRole('link', { name: 'Credits' }).click();
      await page.getByRole('button', { name: 'Buy Starter' }).click();
      await page.waitForURL(/\/c\/pay\/cs_/);
      const sessionId = new URL(page.url()).pathname.split('/').at(-1) ?? '';
      const session = bed.stripe.getSession(sessionId);
      assert.ok(session);
      if (outcome === 'expired') {
        await deliver('checkout.session.expired', { ...session, status: 'expired', url: null });
      } else {
        const unpaid = bed.stripe.completeSession(sessionId, 'unpaid');
        await deliver('checkout.session.completed', unpaid);
        await deliver('checkout.session.async_payment_failed', unpaid);
      }
      await page.goto(String(session['success_url']).replace('{CHECKOUT_SESSION_ID}', sessionId));
      const text = outcome === 'expired' ? 'This checkout expired before it was paid' : 'The payment for this checkout failed';
      await page.getByRole('status').filter({ hasText: text }).waitFor();
      await page.getByRole('heading', { level: 1, name: outcome === 'expired' ? 'Checkout expired' : 'Payment failed' }).waitFor();
      assert.equal(await page.getByText('went through').count(), 0);
      await screenshot(page, `checkout-${outcome}`);
      await context.close();
    });
  }
});
