import { Type, type Static } from 'typebox';
import { ProviderSchema } from '../../catalogue.ts';
import { IsoDateTime, named, ref, type NamedSchema } from '../../http/schemas.ts';

/**
 * Printable ASCII without spaces, 8 to 512 characters; surrounding whitespace (a pasted newline)
 * is tolerated and trimmed. Every provider's keys fit; anything else could not be sent in a header.
 */
const ApiKey = Type.String({
  pattern: '^\\s*[\\x21-\\x7E]{8,512}\\s*$',
  maxLength: 600,
  description: 'The plaintext key; write-only, never returned or logged',
});

const modelId = (description?: string) => Type.String({ minLength: 1, maxLength: 200, pattern: '^\\S+$', ...(description ? { description } : {}) });

export const ProviderParams = Type.Object({ provider: ProviderSchema });

export const SaveProviderKeyBody = Type.Object(
  {
    apiKey: ApiKey,
    defaultModel: Type.Optional(modelId('Must be among the models the probe lists, when the probe could list them')),
  },
  { additionalProperties: false },
);
export type SaveProviderKeyInput = Static<typeof SaveProviderKeyBody>;

export const UpdateProviderKeyBody = Type.Object(
  {
    defaultModel: Type.Optional(modelId('Any model id; not checked against the provider')),
    active: Type.Optional(Type.Boolean({ description: 'true makes this the active key (others become inactive); false leaves no active key' })),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateProviderKeyInput = Static<typeof UpdateProviderKeyBody>;

/** DESIGN §13: a key the provider refused during an advisor turn (401/403); a new save clears both. */
const rejectionFields = {
  rejectedAt: Type.Union([IsoDateTime, Type.Null()], { description: 'When the provider refused this key during an advisor turn; null if it has not' }),
  rejectedReason: Type.Union([Type.String(), Type.Null()], { description: 'Why, in words (e.g. "openai refused the key (HTTP 401) during an advisor turn")' }),
};

const itemFields = {
  provider: ProviderSchema,
  keyHintTail: Type.String({ description: 'Last 4 characters of the key' }),
  defaultModel: Type.String(),
  active: Type.Boolean({ description: 'The active key decides the provider and model of a new conversation' }),
  verified: Type.Boolean({ description: 'The provider accepted this key when it was saved, and has not refused it since' }),
  lastVerifiedAt: Type.Union([IsoDateTime, Type.Null()], { description: 'When a probe last accepted this key; null if stored unverified or refused since' }),
  ...rejectionFields,
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
};

const ProviderKeyListItemSchema = named('ProviderKeyListItem', Type.Object(itemFields));
export const ProviderKeyListItem = ref(ProviderKeyListItemSchema);
export type ProviderKeyListItemDto = Static<typeof ProviderKeyListItemSchema>;

const SavedProviderKeySchema = named(
  'SavedProviderKey',
  Type.Object(itemFields, { description: 'verified false: the probe failed transiently and the key was stored anyway' }),
);
export const SavedProviderKey = ref(SavedProviderKeySchema);
export type SavedProviderKeyDto = Static<typeof SavedProviderKeySchema>;

const ProviderKeyListSchema = named('ProviderKeyList', Type.Object({ items: Type.Array(ProviderKeyListItem) }));
export const ProviderKeyList = ref(ProviderKeyListSchema);

export const SaveMarketDataKeyBody = Type.Object({ apiKey: ApiKey }, { additionalProperties: false });
export type SaveMarketDataKeyInput = Static<typeof SaveMarketDataKeyBody>;

/** Spec 2.1 plus the provider and times; an unconfigured key reads `configured: false` with nulls. */
const MarketDataKeyStatusSchema = named(
  'MarketDataKeyStatus',
  Type.Object({
    configured: Type.Boolean(),
    keyHintTail: Type.Union([Type.String(), Type.Null()]),
    verified: Type.Boolean({ description: 'The stored key was accepted by its provider when it was saved' }),
    provider: Type.Union([Type.Literal('polygon'), Type.Literal('fmp'), Type.Null()]),
    lastVerifiedAt: Type.Union([IsoDateTime, Type.Null()]),
    ...rejectionFields,
    updatedAt: Type.Union([IsoDateTime, Type.Null()]),
  }),
);
export const MarketDataKeyStatus = ref(MarketDataKeyStatusSchema);
export type MarketDataKeyStatusDto = Static<typeof MarketDataKeyStatusSchema>;

/** Registered as shared schemas (app.ts): `components.schemas` of the OpenAPI document. */
export const components: NamedSchema[] = [ProviderKeyListItemSchema, SavedProviderKeySchema, ProviderKeyListSchema, MarketDataKeyStatusSchema];
