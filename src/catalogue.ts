import { Type, type Static } from 'typebox';
import { globMatches } from './model-glob.ts';

export const PROVIDERS = ['openai', 'anthropic', 'google', 'mistral', 'xai', 'groq', 'deepseek', 'openrouter'] as const;
export type Provider = (typeof PROVIDERS)[number];

const CreditPack = Type.Object(
  {
    packId: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$' }),
    name: Type.String({ minLength: 1 }),
    credits: Type.Integer({ minimum: 1 }),
    amount: Type.Integer({ minimum: 1 }),
    currency: Type.String({ pattern: '^[a-z]{3}$' }),
  },
  { additionalProperties: false },
);

const Tier = Type.Object(
  {
    monthlyAllowanceTurns: Type.Integer({ minimum: 0 }),
    monthlyImages: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);

export const ProviderSchema = Type.Union([
  Type.Literal('openai'),
  Type.Literal('anthropic'),
  Type.Literal('google'),
  Type.Literal('mistral'),
  Type.Literal('xai'),
  Type.Literal('groq'),
  Type.Literal('deepseek'),
  Type.Literal('openrouter'),
]);

/** DESIGN §13: the provider's list prices, USD per million tokens (what a turn costs on the user's own key). */
const Pricing = Type.Object(
  {
    inputPerMTok: Type.Number({ minimum: 0, maximum: 10_000 }),
    outputPerMTok: Type.Number({ minimum: 0, maximum: 10_000 }),
    /** Cache reads; absent: cached input is priced as input. */
    cachedInputPerMTok: Type.Optional(Type.Number({ minimum: 0, maximum: 10_000 })),
  },
  { additionalProperties: false },
);

const ModelEntry = Type.Object(
  {
    provider: ProviderSchema,
    match: Type.String({ minLength: 1 }),
    allowance: Type.Boolean(),
    creditsPerTurn: Type.Integer({ minimum: 0 }),
    images: Type.Optional(Type.Boolean()),
    /** DESIGN §11: false → no tool is offered to this model. Default true. */
    tools: Type.Optional(Type.Boolean()),
    /** DESIGN §13: absent → estimatedCostUsd null (unless the provider reports its own cost). */
    pricing: Type.Optional(Pricing),
  },
  { additionalProperties: false },
);

const Persona = Type.Object(
  {
    personaId: Type.String({ minLength: 1, maxLength: 64 }),
    name: Type.String({ minLength: 1 }),
    systemPrompt: Type.String({ minLength: 1 }),
  },
  { additionalProperties: false },
);

export const CatalogueSchema = Type.Object(
  {
    creditPacks: Type.Array(CreditPack),
    tiers: Type.Record(Type.String({ pattern: '^[a-z0-9_-]{1,32}$' }), Tier),
    defaultTier: Type.String({ minLength: 1 }),
    models: Type.Array(ModelEntry),
    providerDefaults: Type.Partial(Type.Record(ProviderSchema, Type.Array(Type.String({ minLength: 1 })))),
    personas: Type.Array(Persona),
  },
  { additionalProperties: false },
);

export const CreditPacksSchema = Type.Array(CreditPack);

export type Catalogue = Static<typeof CatalogueSchema>;
export type TierConfig = Static<typeof Tier>;
export type ModelEntryConfig = Static<typeof ModelEntry>;
export type PricingConfig = Static<typeof Pricing>;

/** List prices in USD per million tokens: input, output and (where the provider discounts it) cached input. */
function usd(inputPerMTok: number, outputPerMTok: number, cachedInputPerMTok?: number): PricingConfig {
  return cachedInputPerMTok === undefined ? { inputPerMTok, outputPerMTok } : { inputPerMTok, outputPerMTok, cachedInputPerMTok };
}

const COACH_PROMPT =
  'You are a trading coach inside a trading journal. Help the trader reflect on their process, risk and discipline. ' +
  'You do not give personalised investment advice or guarantees; you ask clarifying questions and explain your reasoning.';

/**
 * The built-in catalogue. Prices are the providers' published list prices (USD per million tokens,
 * standard tier, prompts under any long-context threshold) as of 2025; an operator keeps them current
 * with CONFIG_FILE. Entries whose match covers models priced differently (e.g. `claude-opus-4*`,
 * `pixtral*`) carry none: an unknown cost is null, never a guess. OpenRouter reports each call's cost.
 *
 * Cheap, fast models are "allowance" models (paid with free monthly turns);
 * frontier models cost credits. Operators replace all of it with CONFIG_FILE.
 */
export const BUILT_IN_CATALOGUE: Catalogue = {
  creditPacks: [
    { packId: 'credits_500', name: '500 credits', credits: 500, amount: 1000, currency: 'usd' },
    { packId: 'credits_1500', name: '1,500 credits', credits: 1500, amount: 2500, currency: 'usd' },
    { packId: 'credits_5000', name: '5,000 credits', credits: 5000, amount: 7500, currency: 'usd' },
  ],
  tiers: {
    free: { monthlyAllowanceTurns: 30, monthlyImages: 20 },
    pro: { monthlyAllowanceTurns: 1000, monthlyImages: 500 },
  },
  defaultTier: 'free',
  models: [
    { provider: 'openai', match: 'gpt-4o-mini*', allowance: true, creditsPerTurn: 1, pricing: usd(0.15, 0.6, 0.075) },
    { provider: 'openai', match: 'gpt-4.1-mini*', allowance: true, creditsPerTurn: 1, pricing: usd(0.4, 1.6, 0.1) },
    { provider: 'openai', match: 'gpt-4.1-nano*', allowance: true, creditsPerTurn: 1, pricing: usd(0.1, 0.4, 0.025) },
    { provider: 'openai', match: 'gpt-5-mini*', allowance: true, creditsPerTurn: 1, pricing: usd(0.25, 2, 0.025) },
    { provider: 'openai', match: 'gpt-4o*', allowance: false, creditsPerTurn: 5, pricing: usd(2.5, 10, 1.25) },
    { provider: 'openai', match: 'gpt-4.1*', allowance: false, creditsPerTurn: 5, pricing: usd(2, 8, 0.5) },
    { provider: 'openai', match: 'gpt-5*', allowance: false, creditsPerTurn: 8, pricing: usd(1.25, 10, 0.125) },
    { provider: 'openai', match: 'o3*', allowance: false, creditsPerTurn: 8, pricing: usd(2, 8, 0.5) },
    { provider: 'openai', match: 'o4-mini*', allowance: false, creditsPerTurn: 4, pricing: usd(1.1, 4.4, 0.275) },
    { provider: 'anthropic', match: 'claude-3-5-haiku*', allowance: true, creditsPerTurn: 1, pricing: usd(0.8, 4, 0.08) },
    { provider: 'anthropic', match: 'claude-haiku-4*', allowance: true, creditsPerTurn: 1, pricing: usd(1, 5, 0.1) },
    { provider: 'anthropic', match: 'claude-sonnet-4*', allowance: false, creditsPerTurn: 6, pricing: usd(3, 15, 0.3) },
    { provider: 'anthropic', match: 'claude-3-7-sonnet*', allowance: false, creditsPerTurn: 6, pricing: usd(3, 15, 0.3) },
    { provider: 'anthropic', match: 'claude-opus-4*', allowance: false, creditsPerTurn: 20 },
    { provider: 'google', match: 'gemini-2.0-flash*', allowance: true, creditsPerTurn: 1, pricing: usd(0.1, 0.4, 0.025) },
    { provider: 'google', match: 'gemini-2.5-flash*', allowance: true, creditsPerTurn: 1, pricing: usd(0.3, 2.5, 0.03) },
    { provider: 'google', match: 'gemini-2.5-pro*', allowance: false, creditsPerTurn: 6, pricing: usd(1.25, 10, 0.125) },
    { provider: 'mistral', match: 'mistral-small*', allowance: true, creditsPerTurn: 1, pricing: usd(0.1, 0.3) },
    { provider: 'mistral', match: 'pixtral*', allowance: false, creditsPerTurn: 3 },
    { provider: 'mistral', match: 'mistral-medium*', allowance: false, creditsPerTurn: 3, pricing: usd(0.4, 2) },
    { provider: 'mistral', match: 'mistral-large*', allowance: false, creditsPerTurn: 5, images: false, pricing: usd(2, 6) },
    { provider: 'xai', match: 'grok-3-mini*', allowance: true, creditsPerTurn: 1, images: false, pricing: usd(0.3, 0.5, 0.075) },
    { provider: 'xai', match: 'grok-4*', allowance: false, creditsPerTurn: 6, pricing: usd(3, 15, 0.75) },
    { provider: 'xai', match: 'grok-3*', allowance: false, creditsPerTurn: 5, images: false, pricing: usd(3, 15, 0.75) },
    { provider: 'groq', match: 'llama-3.1-8b-instant', allowance: true, creditsPerTurn: 1, images: false, pricing: usd(0.05, 0.08) },
    { provider: 'groq', match: 'llama-3.3-70b-versatile', allowance: true, creditsPerTurn: 1, images: false, pricing: usd(0.59, 0.79) },
    { provider: 'groq', match: 'meta-llama/llama-4-*', allowance: true, creditsPerTurn: 1 },
    { provider: 'deepseek', match: 'deepseek-chat', allowance: true, creditsPerTurn: 1, images: false, pricing: usd(0.28, 0.42, 0.028) },
    { provider: 'deepseek', match: 'deepseek-reasoner', allowance: false, creditsPerTurn: 2, images: false, pricing: usd(0.28, 0.42, 0.028) },
    { provider: 'openrouter', match: 'openai/gpt-4o-mini*', allowance: true, creditsPerTurn: 1 },
    { provider: 'openrouter', match: 'google/gemini-2.5-flash*', allowance: true, creditsPerTurn: 1 },
    { provider: 'openrouter', match: 'anthropic/claude-sonnet-4*', allowance: false, creditsPerTurn: 6 },
    { provider: 'openrouter', match: 'openai/gpt-4.1*', allowance: false, creditsPerTurn: 5 },
  ],
  providerDefaults: {
    openai: ['gpt-4o-mini', 'gpt-4.1-mini', 'gpt-5-mini'],
    anthropic: ['claude-haiku-4-5', 'claude-3-5-haiku-latest', 'claude-sonnet-4-5'],
    google: ['gemini-2.5-flash', 'gemini-2.0-flash'],
    mistral: ['mistral-small-latest', 'mistral-medium-latest'],
    xai: ['grok-3-mini', 'grok-4'],
    groq: ['llama-3.3-70b-versatile', 'llama-3.1-8b-instant'],
    deepseek: ['deepseek-chat'],
    openrouter: ['openai/gpt-4o-mini', 'google/gemini-2.5-flash'],
  },
  personas: [
    { personaId: 'coach', name: 'Trading coach', systemPrompt: COACH_PROMPT },
    {
      personaId: 'risk-manager',
      name: 'Risk manager',
      systemPrompt:
        "You are a strict risk manager reviewing a trader's plans and journal. Focus on position sizing, stop placement, " +
        'drawdown and rule violations. Be concise and concrete; never promise returns.',
    },
    {
      personaId: 'journal-reviewer',
      name: 'Journal reviewer',
      systemPrompt:
        'You review trading-journal entries and charts. Identify patterns in entries, exits and emotions, and suggest one ' +
        'measurable improvement at a time.',
    },
  ],
};

/** Cross-field checks the schema cannot express; returns human-readable problems. */
export function catalogueProblems(c: Catalogue): string[] {
  const problems: string[] = [];
  if (!(c.defaultTier in c.tiers)) problems.push(`defaultTier "${c.defaultTier}" is not a tier`);
  const dup = <T>(items: T[], key: (t: T) => string, what: string) => {
    const seen = new Set<string>();
    for (const item of items) {
      const k = key(item);
      if (seen.has(k)) problems.push(`duplicate ${what} "${k}"`);
      seen.add(k);
    }
  };
  for (const key of Object.keys(c.providerDefaults)) {
    if (!(PROVIDERS as readonly string[]).includes(key)) problems.push(`providerDefaults names unknown provider "${key}"`);
  }
  dup(c.creditPacks, (p) => p.packId, 'packId');
  dup(c.personas, (p) => p.personaId, 'personaId');
  return problems;
}

/** First matching entry wins (DESIGN §1). */
export function findModel(c: Catalogue, provider: Provider, model: string): ModelEntryConfig | undefined {
  return c.models.find((m) => m.provider === provider && globMatches(m.match, model));
}
