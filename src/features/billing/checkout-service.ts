import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import type { RateLimitRule } from '../../platform/rate-limiter.ts';
import type { PaymentsClient } from '../../providers/payments/stripe.ts';
import * as repo from './repo.ts';

/**
 * How long a Checkout Session stays open: Stripe's default (24 hours; the service does not set
 * `expires_at`). A session still unpaid after it can no longer be paid.
 */
const CHECKOUT_SESSION_LIFETIME_MS = 24 * 3_600_000;

/** DESIGN §4: 10 checkouts per rolling 60 s per user. */
export const CHECKOUT_RULE: RateLimitRule = { name: 'checkouts', limit: 10, windowMs: 60_000 };

type CheckoutDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'ids' | 'logger'>;

/**
 * Where the hosted checkout returns: the configured URL, moved onto the origin the page was opened on
 * (the request's `Origin`) when that origin is one of the allowed ones, so the trader comes back to the
 * tab's own origin and session; any other origin (or none) gets the configured URL as it is.
 */
function returnUrls(config: CheckoutDeps['config'], pageOrigin: string | undefined): { successUrl: string; cancelUrl: string } {
  const allowed = pageOrigin !== undefined && config.allowedOrigins.includes(pageOrigin);
  // The rest of the URL is kept as written: a URL parser would escape the {CHECKOUT_SESSION_ID} placeholder.
  const onPage = (configured: string) => (allowed ? `${pageOrigin}${configured.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '')}` : configured);
  return { successUrl: onPage(config.checkoutSuccessUrl), cancelUrl: onPage(config.checkoutCancelUrl) };
}

/**
 * Spec 4.6: opens a hosted checkout for a configured pack and records the pending purchase with the
 * credits and amount of that moment. No wallet write: credits come with the webhook.
 */
export async function startCheckout(
  deps: CheckoutDeps,
  payments: PaymentsClient | undefined,
  userId: string,
  packId: string,
  pageOrigin: string | undefined,
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
      ...returnUrls(deps.config, pageOrigin),
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

type CheckoutStateName = 'pending' | 'credited' | 'expired' | 'failed';

/**
 * The state of the caller's own checkout session, as the return page shows it: `credited` once the
 * webhook has granted its credits (whatever the time); `expired` after `checkout.session.expired` or
 * when its lifetime has passed without a credit; `failed` after `checkout.session.async_payment_failed`;
 * else `pending`. Another user's session, or one this service did not open, is 404 CHECKOUT_NOT_FOUND.
 */
export async function checkoutState(deps: Pick<Deps, 'db' | 'clock'>, userId: string, sessionId: string) {
  const p = await repo.findOwnPurchase(deps.db, userId, sessionId);
  if (!p) throw new AppError('CHECKOUT_NOT_FOUND', 'checkout session not found');
  const expiresAt = new Date(p.created_at.getTime() + CHECKOUT_SESSION_LIFETIME_MS);
  const state: CheckoutStateName = p.status === 'paid' ? 'credited' : p.status !== 'pending' ? p.status : deps.clock.now() >= expiresAt ? 'expired' : 'pending';
  return {
    sessionId,
    state,
    packId: p.pack_id,
    credits: p.credits,
    amount: p.amount,
    currency: p.currency,
    createdAt: p.created_at.toISOString(),
    expiresAt: expiresAt.toISOString(),
    creditedAt: p.paid_at?.toISOString() ?? null,
  };
}
