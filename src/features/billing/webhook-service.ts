import type { Deps } from '../../deps.ts';
import type { PaymentEvent } from '../../providers/payments/stripe.ts';
import { ensureUser } from '../users/service.ts';
import { appendEntry, CHECKOUT_REFERENCE } from './ledger.ts';
import * as repo from './repo.ts';

type WebhookDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'ids' | 'logger' | 'metrics' | 'seenUsers'>;

export type WebhookOutcome =
  | 'credited'
  | 'already-credited'
  | 'closed'
  | 'already-closed'
  | 'refunded'
  | 'already-refunded'
  | 'dispute-taken'
  | 'dispute-given-back'
  | 'dispute-unchanged'
  | 'ignored';

/** Dispute statuses after which the buyer's money is the seller's again: the credits go back. */
const DISPUTE_RESOLVED_FOR_SELLER = new Set(['won', 'warning_closed']);

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
    case 'checkout.session.expired':
      return closeSession(deps, event, 'expired');
    case 'checkout.session.async_payment_failed':
      return closeSession(deps, event, 'failed');
    case 'charge.refunded':
      return refundCharge(deps, event);
    case 'charge.dispute.created':
      return settleDispute(deps, event, false);
    case 'charge.dispute.closed':
      return settleDispute(deps, event, DISPUTE_RESOLVED_FOR_SELLER.has(str(event.object['status']) ?? ''));
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
      reference: `${CHECKOUT_REFERENCE}${sessionId}`,
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
 * DESIGN §8: the checkout's state becomes `expired` / `failed`. Only a pending purchase changes: one
 * already credited stays credited, and a redelivery finds it closed.
 */
async function closeSession(deps: WebhookDeps, event: PaymentEvent, status: 'expired' | 'failed'): Promise<WebhookOutcome> {
  const sessionId = str(event.object['id']);
  if (!sessionId) return ignore(deps, event, 'session has no id');
  if (await repo.markPurchaseClosed(deps.db, sessionId, status)) {
    deps.logger.info({ eventId: event.id, sessionId, status }, 'checkout closed unpaid');
    return 'closed';
  }
  return (await repo.findPurchaseBySession(deps.db, sessionId)) ? 'already-closed' : ignore(deps, event, 'session is not a checkout of this service');
}

/** Round-half-up of credits × part / whole, capped at the credits: the share of a purchase a refund or dispute concerns. */
function shareOf(credits: number, part: number, whole: number): number {
  return Math.min(credits, Math.floor((2 * credits * Math.min(part, whole) + whole) / (2 * whole)));
}

interface ChargeOwner {
  readonly userId: string;
  readonly credits: number;
  /** What the buyer paid, in minor units; undefined when only the charge's metadata names the purchase. */
  readonly amount: number | undefined;
}

/**
 * Whose purchase a charge paid for: the purchase recorded with its payment intent (stored when the
 * session completed), else the one its metadata names (set by this service on the payment intent),
 * else the user and credits that metadata carries.
 */
async function chargeOwner(deps: WebhookDeps, paymentIntent: string | undefined, metadata: Record<string, unknown>): Promise<ChargeOwner | undefined> {
  const purchaseId = str(metadata['purchaseId']);
  let purchase = paymentIntent ? await repo.findPurchaseByPaymentIntent(deps.db, paymentIntent) : undefined;
  if (!purchase && purchaseId && UUID.test(purchaseId)) purchase = await repo.findPurchaseById(deps.db, purchaseId);
  const userId = purchase?.user_id ?? str(metadata['userId']);
  const credits = purchase?.credits ?? positiveInt(metadata['credits']);
  return userId && credits ? { userId, credits, amount: purchase?.amount } : undefined;
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
  const owner = await chargeOwner(deps, idOf(charge['payment_intent']), record(charge['metadata']));
  if (!owner) return ignore(deps, event, 'charge is not a credit-pack purchase of this service');
  const { userId } = owner;
  const target = shareOf(owner.credits, refunded, amount);
  await ensureUser(deps, userId, undefined);
  const now = deps.clock.now();
  const prefix = refundPrefix(chargeId);
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

const refundPrefix = (chargeId: string) => `refund:${chargeId}:`;

/**
 * A dispute (chargeback) takes the disputed share of the purchase back, as a refund would: once, by
 * the reference `dispute:<id>:taken`. When it is resolved for the seller (won; an inquiry closed
 * without a chargeback) exactly what was taken is given back, once, by `dispute:<id>:won`. Every
 * delivery of either event first makes sure the take-back exists, so whatever the order — a `closed`
 * before its `created` — the ledger ends the same and never holds the give-back alone.
 */
async function settleDispute(deps: WebhookDeps, event: PaymentEvent, giveBack: boolean): Promise<WebhookOutcome> {
  const dispute = event.object;
  const disputeId = str(dispute['id']);
  const disputed = positiveInt(dispute['amount']);
  if (!disputeId || !disputed) return ignore(deps, event, 'dispute lacks id or amount');
  // `charge` is an id, or the Charge itself when the endpoint expands it.
  const charge = record(dispute['charge']);
  const chargeId = idOf(dispute['charge']);
  const owner = await chargeOwner(deps, idOf(dispute['payment_intent']) ?? idOf(charge['payment_intent']), record(charge['metadata']));
  const paid = owner?.amount ?? positiveInt(charge['amount']);
  if (!owner || !paid) return ignore(deps, event, 'disputed charge is not a credit-pack purchase of this service');
  const { userId } = owner;
  await ensureUser(deps, userId, undefined);
  const now = deps.clock.now();
  const prefix = `dispute:${disputeId}:`;
  const outcome = await deps.db.transaction().execute(async (trx): Promise<WebhookOutcome> => {
    await repo.lockWallet(trx, userId);
    // What refunds of the same charge already took is not taken twice.
    const refunded = chargeId ? -(await repo.sumByReferencePrefix(trx, userId, refundPrefix(chargeId))) : 0;
    const share = Math.min(shareOf(owner.credits, disputed, paid), owner.credits - refunded);
    let written: WebhookOutcome = 'dispute-unchanged';
    if (share > 0) {
      // The balance may go negative here, as after a refund.
      const taken = await appendEntry(trx, { id: deps.ids.uuid(), userId, amount: -share, kind: 'refund', reference: `${prefix}taken`, note: 'dispute', now });
      if (taken) written = 'dispute-taken';
    }
    if (!giveBack) return written;
    const net = await repo.sumByReferencePrefix(trx, userId, prefix);
    if (net >= 0) return written;
    const given = await appendEntry(trx, { id: deps.ids.uuid(), userId, amount: -net, kind: 'refund', reference: `${prefix}won`, note: 'dispute won', now });
    return given ? 'dispute-given-back' : written;
  });
  if (outcome !== 'dispute-unchanged') deps.logger.info({ eventId: event.id, disputeId, chargeId, userId, outcome }, 'dispute applied to credits');
  return outcome;
}

function ignore(deps: WebhookDeps, event: PaymentEvent, why: string): WebhookOutcome {
  deps.logger.warn({ eventId: event.id, type: event.type, why }, 'stripe event ignored');
  return 'ignored';
}
