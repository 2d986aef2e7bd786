import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { enforceRateLimit } from '../../http/rate-limit.ts';
import { responses } from '../../http/schemas.ts';
import { verifyStripeEvent, WebhookSignatureError, type VerifiedWebhook } from '../../providers/payments/stripe.ts';
import { CHECKOUT_RULE, checkoutState, startCheckout } from './checkout-service.ts';
import {
  CheckoutBody,
  CheckoutResult,
  CheckoutSessionParams,
  CheckoutState,
  documentStripeWebhook,
  LedgerPage,
  LedgerQuery,
  PackList,
  Wallet,
  WebhookAck,
} from './schemas.ts';
import { ledgerPage, listPacks, wallet } from './wallet-service.ts';
import { applyStripeEvent } from './webhook-service.ts';

const WEBHOOK_BODY_LIMIT = 1024 * 1024;

export async function billingRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['billing'];

  app.get(
    '/billing/packs',
    { schema: { operationId: 'listCreditPacks', tags, summary: 'Credit packs on sale', response: responses({ 200: PackList }) } },
    async () => ({
      items: await listPacks(deps),
    }),
  );

  app.get(
    '/billing/wallet',
    {
      schema: {
        operationId: 'getWallet',
        tags,
        summary: 'Credits, tier, and this month’s allowance and image quota',
        response: responses({ 200: Wallet }),
      },
    },
    async (req) => wallet(deps, req.user.id),
  );

  app.get(
    '/billing/ledger',
    {
      schema: {
        operationId: 'listLedgerEntries',
        tags,
        summary: 'Ledger entries, newest first',
        description: 'Cursor-paginated; `cursor` is the previous page’s `nextCursor`; `limit` 1–100 (default 25).',
        querystring: LedgerQuery,
        response: responses({ 200: LedgerPage }),
      },
    },
    async (req) => ledgerPage(deps, req.user.id, req.query.cursor, req.query.limit ?? 25),
  );

  app.post(
    '/billing/checkout',
    {
      // Route-level, after authentication and before the body is validated: every attempt counts (DESIGN §4).
      onRequest: async (req, reply) => enforceRateLimit(deps.limiter, CHECKOUT_RULE, req.user.id, reply),
      schema: {
        operationId: 'createCheckoutSession',
        tags,
        summary: 'Start a hosted checkout for a credit pack (spec 4.6)',
        description:
          'Missing or empty packId → 400 VALIDATION_ERROR; a packId that is not configured → 400 UNKNOWN_PACK; ' +
          'payments unconfigured → 402 BILLING_NOT_AVAILABLE; 10 per rolling 60 s → 429 RATE_LIMITED. ' +
          'Credits are granted by the payment webhook, never by this call. The checkout returns to CHECKOUT_SUCCESS_URL / ' +
          "CHECKOUT_CANCEL_URL, moved onto the request's `Origin` when that origin is one of ALLOWED_ORIGINS (any other origin " +
          'gets the configured URLs as they are).',
        body: CheckoutBody,
        response: responses({ 200: CheckoutResult }),
      },
    },
    async (req) => startCheckout(deps, deps.payments, req.user.id, req.body.packId, req.headers.origin),
  );

  app.get(
    '/billing/checkout/:sessionId',
    {
      schema: {
        operationId: 'getCheckoutState',
        tags,
        summary: 'The state of one of the caller’s checkouts: pending, credited, expired or failed',
        description:
          'What a return page shows instead of assuming the payment went through: `credited` only once the payment webhook has granted ' +
          "the credits. Owner only: another user's session, or one this service did not open, is 404 CHECKOUT_NOT_FOUND.",
        params: CheckoutSessionParams,
        response: responses({ 200: CheckoutState }),
      },
    },
    async (req) => checkoutState(deps, req.user.id, req.params.sessionId),
  );

  await app.register(stripeWebhookRoutes, { deps });
}

/** Its own encapsulated scope: here, and only here, bodies stay raw bytes for the signature check. */
async function stripeWebhookRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT }, (_req, body, done) => done(null, body));

  app.post(
    '/billing/webhooks/stripe',
    {
      config: { public: true, swaggerTransform: documentStripeWebhook },
      bodyLimit: WEBHOOK_BODY_LIMIT,
      schema: {
        operationId: 'receiveStripeWebhook',
        tags: ['billing'],
        summary: 'Stripe webhook (no bearer token; Stripe-Signature over the raw body)',
        description:
          'Grants credits once per checkout session (checkout.session.completed with payment_status paid, or ' +
          'checkout.session.async_payment_succeeded); checkout.session.expired and checkout.session.async_payment_failed close a ' +
          'pending checkout as expired / failed; charge.refunded takes back the refunded share; charge.dispute.created ' +
          'takes back the disputed share and charge.dispute.closed with status won gives it back. ' +
          'Bad signature, or a signature timestamp more than 300 s in the past or the future → 400 INVALID_SIGNATURE. ' +
          'Other event types, signed bodies that are not snapshot events (thin v2 events), and signed bodies holding text the ' +
          'store cannot hold (bytes that are not UTF-8, ' +
          '\\u0000, an unpaired surrogate) → 200, logged, nothing written.',
        security: [],
        response: responses({ 200: WebhookAck }),
      },
    },
    async (req) => {
      const secret = deps.config.stripe.webhookSecret;
      if (secret === undefined) {
        req.log.error('a Stripe webhook arrived but STRIPE_WEBHOOK_SECRET is not set');
        throw new AppError('BILLING_NOT_AVAILABLE', 'payments are not configured on this service');
      }
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const header = req.headers['stripe-signature'];
      let verified: VerifiedWebhook;
      try {
        verified = await verifyStripeEvent(raw, typeof header === 'string' ? header : undefined, secret, deps.clock.now().getTime());
      } catch (err) {
        if (!(err instanceof WebhookSignatureError)) throw err;
        req.log.warn({ reason: err.message }, 'stripe webhook refused');
        throw new AppError('INVALID_SIGNATURE', 'the Stripe-Signature header does not verify this body');
      }
      if (verified.kind === 'unreadable') {
        req.log.warn(
          { eventId: verified.id, type: verified.type, reason: verified.reason },
          'signed stripe webhook not readable; acknowledged, nothing written',
        );
        return { received: true };
      }
      const event = verified.event;
      const outcome = await applyStripeEvent(deps, event);
      req.log.info({ eventId: event.id, type: event.type, outcome }, 'stripe event processed');
      return { received: true };
    },
  );
}
