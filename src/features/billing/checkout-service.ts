import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import type { RateLimitRule } from '../../platform/rate-limiter.ts';
import type { PaymentsClient } from '../../providers/payments/stripe.ts';
import * as repo from './repo.ts';

/** DESIGN §4: 10 checkouts per rolling 60 s per user. */
export const CHECKOUT_RULE: RateLimitRule = { name: 'checkouts', limit: 10, windowMs: 60_000 };

type CheckoutDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'ids' | 'logger'>;

/**
 * Spec 4.6: opens a hosted checkout for a configured pack and records the pending purchase with the
 * credits and amount of that moment. No wallet write: credits come with the webhook.
 */
export async function startCheckout(
  deps: CheckoutDeps,
  payments: PaymentsClient | undefined,
  userId: string,
  packId: string,
): Promise<{ url: string; sessionId: string }> {
  if (!payments) throw new AppError('BILLING_NOT_AVAILABLE', 'payments are not configured on this service');
  const pack = deps.config.catalogue.creditPacks.find((p) => p.packId === packId);
  if (!pack) {
    throw new AppError('UNKNOWN_PACK', '/packId: is not a configured credit pack', {
      details: [{ path: '/packId', message: 'is not a configured credit pack' }],
    });
  }
  const purchaseId = deps.ids.uuid();
  let session;
  try {
    // No transaction is open across this call: the processor may be slow, the database is shared.
    session = await payments.createCheckoutSession({
      purchaseId,
      userId,
      packId: pack.packId,
      packName: pack.name,
      credits: pack.credits,
      amount: pack.amount,
      currency: pack.currency,
      successUrl: deps.config.checkoutSuccessUrl,
      cancelUrl: deps.config.checkoutCancelUrl,
    });
  } catch (err) {
    deps.logger.error({ err: err instanceof Error ? err.message : String(err), purchaseId }, 'checkout session could not be created');
    throw new AppError('PAYMENT_PROVIDER_ERROR', 'the payment provider could not start a checkout; try again');
  }
  // If this insert fails the session still exists; its metadata lets the webhook credit it anyway.
  await repo.insertPurchase(deps.db, {
    id: purchaseId,
    user_id: userId,
    pack_id: pack.packId,
    credits: pack.credits,
    amount: pack.amount,
    currency: pack.currency,
    session_id: session.sessionId,
    payment_intent: null,
    status: 'pending',
    created_at: deps.clock.now(),
    paid_at: null,
  });
  return { url: session.url, sessionId: session.sessionId };
}
