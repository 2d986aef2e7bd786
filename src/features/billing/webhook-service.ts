import type { Deps } from '../../deps.ts';
import type { PaymentEvent } from '../../providers/payments/stripe.ts';
import { ensureUser } from '../users/service.ts';
import { appendEntry } from './ledger.ts';
import * as repo from './repo.ts';

type WebhookDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'ids' | 'logger' | 'metrics' | 'seenUsers'>;

export type WebhookOutcome = 'credited' | 'already-credited' | 'refunded' | 'already-refunded' | 'ignored';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const record = (v: unknown): Record<string, unknown> => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {});
/** An expandable Stripe field: an id, or the object carrying it. */
const idOf = (v: unknown): string | undefined => str(v) ?? str(record(v)['id']);
const positiveInt = (v: unknown): number | undefined => {
  const n = typeof v === 'string' && /^[0-9]{1,12}$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : undefined;
};
const nonNegativeInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined);

/**
 * Applies one verified event. Every write is idempotent by its ledger reference, so redeliveries,
 * reordering and distinct events for one session credit once. Store errors propagate (→ 5xx, the
 * processor retries).
 */
export async function applyStripeEvent(deps: WebhookDeps, event: PaymentEvent): Promise<WebhookOutcome> {
  switch (event.type) {
    case 'checkout.session.completed':
      // Delayed methods complete unpaid first; their async_payment_succeeded event grants.
      return event.object['payment_status'] === 'paid' ? creditSession(deps, event) : 'ignored';
    case 'checkout.session.async_payment_succeeded':
      return creditSession(deps, event);
    case 'charge.refunded':
      return refundCharge(deps, event);
    default:
      return 'ignored';
  }
}

async function creditSession(deps: WebhookDeps, event: PaymentEvent): Promise<WebhookOutcome> {
  const session = event.object;
  const sessionId = str(session['id']);
  if (!sessionId) return ignore(deps, event, 'session has no id');
  const purchase = await repo.findPurchaseBySession(deps.db, sessionId);
  const metadata = record(session['metadata']);
  // The recorded purchase is authoritative; metadata covers a purchase whose row was never written.
  const userId = purchase?.user_id ?? str(metadata['userId']) ?? str(session['client_reference_id']);
  const credits = purchase?.credits ?? positiveInt(metadata['credits']);
  if (!userId || !credits) return ignore(deps, event, 'session is not a credit-pack purchase of this service');
  await ensureUser(deps, userId, undefined);
  const now = deps.clock.now();
  const written = await deps.db.transaction().execute(async (trx) => {
    await repo.lockWallet(trx, userId);
    const inserted = await appendEntry(trx, {
      id: deps.ids.uuid(),
      userId,
      amount: credits,
      kind: 'purchase',
      reference: `checkout:${sessionId}`,
      note: purchase?.pack_id ?? str(metadata['packId']),
      now,
    });
    await repo.markPurchasePaid(trx, sessionId, idOf(session['payment_intent']) ?? null, now);
    return inserted;
  });
  if (!written) return 'already-credited';
  deps.metrics.creditsGranted.inc(credits);
  deps.logger.info({ eventId: event.id, sessionId, userId, credits }, 'credits granted');
  return 'credited';
}

/**
 * Takes back the refunded share of a purchase: round-half-up of credits × amount_refunded / amount,
 * cumulative over the charge's refunds, so each refund event writes only the difference.
 */
async function refundCharge(deps: WebhookDeps, event: PaymentEvent): Promise<WebhookOutcome> {
  const charge = event.object;
  const chargeId = str(charge['id']);
  const amount = positiveInt(charge['amount']);
  const refunded = nonNegativeInt(charge['amount_refunded']);
  if (!chargeId || !amount || refunded === undefined) return ignore(deps, event, 'charge lacks id, amount or amount_refunded');
  const metadata = record(charge['metadata']);
  const paymentIntent = idOf(charge['payment_intent']);
  const purchaseId = str(metadata['purchaseId']);
  let purchase = paymentIntent ? await repo.findPurchaseByPaymentIntent(deps.db, paymentIntent) : undefined;
  if (!purchase && purchaseId && UUID.test(purchaseId)) purchase = await repo.findPurchaseById(deps.db, purchaseId);
  const userId = purchase?.user_id ?? str(metadata['userId']);
  const credits = purchase?.credits ?? positiveInt(metadata['credits']);
  if (!userId || !credits) return ignore(deps, event, 'charge is not a credit-pack purchase of this service');
  const target = Math.min(credits, Math.floor((2 * credits * Math.min(refunded, amount) + amount) / (2 * amount)));
  await ensureUser(deps, userId, undefined);
  const now = deps.clock.now();
  const prefix = `refund:${chargeId}:`;
  const taken = await deps.db.transaction().execute(async (trx) => {
    await repo.lockWallet(trx, userId);
    const already = -(await repo.sumByReferencePrefix(trx, userId, prefix));
    const delta = target - already;
    if (delta <= 0) return 0;
    // The balance may go negative here (credits already spent); spending then stops until it is positive.
    await appendEntry(trx, { id: deps.ids.uuid(), userId, amount: -delta, kind: 'refund', reference: `${prefix}${refunded}`, now });
    return delta;
  });
  if (taken === 0) return 'already-refunded';
  deps.logger.info({ eventId: event.id, chargeId, userId, credits: taken }, 'credits taken back after a refund');
  return 'refunded';
}

function ignore(deps: WebhookDeps, event: PaymentEvent, why: string): WebhookOutcome {
  deps.logger.warn({ eventId: event.id, type: event.type, why }, 'stripe event ignored');
  return 'ignored';
}
