import type { SwaggerTransform } from '@fastify/swagger';
import { Type } from 'typebox';
import { IsoDateTime, named, ref, Uuid, type NamedSchema } from '../../http/schemas.ts';

export const CheckoutBody = Type.Object(
  { packId: Type.String({ minLength: 1, maxLength: 200, description: 'A configured pack (GET /api/billing/packs)' }) },
  { additionalProperties: false },
);

const CheckoutResultSchema = named(
  'CheckoutResult',
  Type.Object({
    url: Type.String({ description: 'Hosted checkout page to redirect to' }),
    sessionId: Type.String({ description: 'Checkout session id; the success URL receives it too' }),
  }),
);
export const CheckoutResult = ref(CheckoutResultSchema);

const CheckoutStateSchema = named(
  'CheckoutState',
  Type.Object({
    sessionId: Type.String(),
    state: Type.Union([Type.Literal('pending'), Type.Literal('credited'), Type.Literal('expired'), Type.Literal('failed')], {
      description:
        "`credited` once the payment webhook has granted the credits; `expired` after Stripe's `checkout.session.expired`, or when the " +
        "session's lifetime (24 h, Stripe's default) has passed without a credit; `failed` after `checkout.session.async_payment_failed` " +
        '(a delayed payment method that did not pay); else `pending` (the payment may be done and its webhook not yet received)',
    }),
    packId: Type.String(),
    credits: Type.Integer({ description: 'Credits the session grants, fixed when it was opened' }),
    amount: Type.Integer({ description: 'Price in the minor unit of `currency`' }),
    currency: Type.String({ description: 'ISO 4217, lower case' }),
    createdAt: IsoDateTime,
    expiresAt: IsoDateTime,
    creditedAt: Type.Union([IsoDateTime, Type.Null()]),
  }),
);
export const CheckoutState = ref(CheckoutStateSchema);

export const CheckoutSessionParams = Type.Object({
  sessionId: Type.String({ pattern: '^[A-Za-z0-9_]{1,255}$', description: 'The `sessionId` a checkout answered (`cs_…`)' }),
});

const PackSchema = named(
  'Pack',
  Type.Object({
    packId: Type.String(),
    name: Type.String(),
    credits: Type.Integer(),
    amount: Type.Integer({ description: 'Price in the minor unit of `currency`' }),
    currency: Type.String({ description: 'ISO 4217, lower case' }),
  }),
);
const PackListSchema = named('PackList', Type.Object({ items: Type.Array(ref(PackSchema)) }));
export const PackList = ref(PackListSchema);

const QuotaSchema = named(
  'Quota',
  Type.Object({
    limit: Type.Integer(),
    used: Type.Integer(),
    remaining: Type.Integer(),
    resetsAt: { ...IsoDateTime, description: 'Start of the next calendar month (UTC)' },
  }),
);

const WalletSchema = named(
  'Wallet',
  Type.Object({
    credits: Type.Integer({ description: 'Balance: the sum of the ledger; negative after a refund of spent credits' }),
    tier: Type.String(),
    allowance: ref(QuotaSchema),
    images: ref(QuotaSchema),
  }),
);
export const Wallet = ref(WalletSchema);

const LedgerKind = Type.Union([Type.Literal('purchase'), Type.Literal('turn'), Type.Literal('turn-return'), Type.Literal('refund'), Type.Literal('grant')]);

const LedgerEntrySchema = named(
  'LedgerEntry',
  Type.Object({
    id: Uuid,
    amount: Type.Integer({ description: 'Credits; negative when taken' }),
    kind: LedgerKind,
    reference: Type.String({ description: 'Unique idempotency reference, e.g. checkout:<sessionId>, turn:<turnId>' }),
    purchase: Type.Union(
      [
        Type.Object({
          packId: Type.String(),
          amount: Type.Integer({ description: 'Price paid, in the minor unit of `currency`' }),
          currency: Type.String({ description: 'ISO 4217, lower case' }),
        }),
        Type.Null(),
      ],
      { description: 'For a purchase: the pack and what was paid for it, as fixed at checkout; else null' },
    ),
    createdAt: IsoDateTime,
  }),
);

const LedgerPageSchema = named(
  'LedgerPage',
  Type.Object({
    items: Type.Array(ref(LedgerEntrySchema)),
    nextCursor: Type.Union([Type.String(), Type.Null()]),
  }),
);
export const LedgerPage = ref(LedgerPageSchema);

export const LedgerQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
  },
  { additionalProperties: false },
);

const WebhookAckSchema = named('WebhookAck', Type.Object({ received: Type.Boolean() }));
export const WebhookAck = ref(WebhookAckSchema);

/** Stripe's event envelope: what the webhook requires of a body once its signature verifies. */
const StripeEventSchema = named(
  'StripeEvent',
  Type.Object(
    {
      id: Type.String({ description: 'evt_…; the same event may be delivered more than once' }),
      object: Type.Optional(Type.Literal('event')),
      type: Type.String({ description: 'The types acted on are in the operation description; any other type is answered 200 and ignored' }),
      api_version: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      created: Type.Optional(Type.Integer({ description: 'Unix seconds' })),
      livemode: Type.Optional(Type.Boolean()),
      data: Type.Object({
        object: Type.Object({}, { additionalProperties: true, description: 'The object the event is about: a Checkout Session, a Charge or a Dispute' }),
        previous_attributes: Type.Optional(Type.Object({}, { additionalProperties: true })),
      }),
    },
    { description: 'A Stripe event (https://docs.stripe.com/api/events/object), sent by Stripe, never by a client' },
  ),
);

const StripeSignatureHeaders = Type.Object({
  'Stripe-Signature': Type.String({
    description:
      '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, signed with the endpoint secret; checked over the exact bytes with a 300 s tolerance',
  }),
});

/**
 * The webhook parses its body itself (the signature covers the raw bytes), so its body and header
 * schemas are for the document only: declared on the route, Fastify would validate them first.
 */
export const documentStripeWebhook: SwaggerTransform = ({ schema, url }) => ({
  schema: { ...schema, headers: StripeSignatureHeaders, body: ref(StripeEventSchema) },
  url,
});

/** Registered as shared schemas (app.ts): `components.schemas` of the OpenAPI document. */
export const components: NamedSchema[] = [
  CheckoutResultSchema,
  CheckoutStateSchema,
  PackSchema,
  PackListSchema,
  QuotaSchema,
  WalletSchema,
  LedgerEntrySchema,
  LedgerPageSchema,
  WebhookAckSchema,
  StripeEventSchema,
];
