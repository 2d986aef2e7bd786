import { Type } from 'typebox';
import { IsoDateTime, Uuid } from '../../http/schemas.ts';

export const CheckoutBody = Type.Object(
  { packId: Type.String({ minLength: 1, maxLength: 200, description: 'A configured pack (GET /api/billing/packs)' }) },
  { additionalProperties: false },
);

export const CheckoutResult = Type.Object({
  url: Type.String({ description: 'Hosted checkout page to redirect to' }),
  sessionId: Type.String({ description: 'Checkout session id; the success URL receives it too' }),
});

export const Pack = Type.Object({
  packId: Type.String(),
  name: Type.String(),
  credits: Type.Integer(),
  amount: Type.Integer({ description: 'Price in the minor unit of `currency`' }),
  currency: Type.String({ description: 'ISO 4217, lower case' }),
});
export const PackList = Type.Object({ items: Type.Array(Pack) });

const Quota = Type.Object({
  limit: Type.Integer(),
  used: Type.Integer(),
  remaining: Type.Integer(),
  resetsAt: { ...IsoDateTime, description: 'Start of the next calendar month (UTC)' },
});

export const Wallet = Type.Object({
  credits: Type.Integer({ description: 'Balance: the sum of the ledger; negative after a refund of spent credits' }),
  tier: Type.String(),
  allowance: Quota,
  images: Quota,
});

export const LedgerKind = Type.Union([
  Type.Literal('purchase'),
  Type.Literal('turn'),
  Type.Literal('turn-return'),
  Type.Literal('refund'),
  Type.Literal('grant'),
]);

export const LedgerItem = Type.Object({
  id: Uuid,
  amount: Type.Integer({ description: 'Credits; negative when taken' }),
  kind: LedgerKind,
  reference: Type.String({ description: 'Unique idempotency reference, e.g. checkout:<sessionId>, turn:<turnId>' }),
  createdAt: IsoDateTime,
});

export const LedgerPage = Type.Object({
  items: Type.Array(LedgerItem),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});

export const LedgerQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
  },
  { additionalProperties: false },
);

export const WebhookAck = Type.Object({ received: Type.Boolean() });
