import { Type, type Static } from 'typebox';
import { CalendarDay } from '../../http/dates.ts';
import { named, ref, type NamedSchema } from '../../http/schemas.ts';

export const UsageQuery = Type.Object(
  {
    from: Type.Optional(CalendarDay('First UTC date included (YYYY-MM-DD); default 29 days before `to`')),
    to: Type.Optional(CalendarDay('Last UTC date included (YYYY-MM-DD); default today (UTC)')),
    groupBy: Type.Optional(Type.Union([Type.Literal('day'), Type.Literal('model'), Type.Literal('provider')], { description: 'Default `day`' })),
  },
  { additionalProperties: false },
);
export type UsageQueryInput = Static<typeof UsageQuery>;

const figures = {
  turns: Type.Integer({ minimum: 0, description: 'Advisor turns that ended in the range' }),
  inputTokens: Type.Integer({ minimum: 0, description: 'Sum of the turns’ input tokens, cached ones included' }),
  outputTokens: Type.Integer({ minimum: 0, description: 'Sum of the turns’ output tokens, reasoning included' }),
  cachedInputTokens: Type.Integer({
    minimum: 0,
    description: 'Of inputTokens, those read from the provider’s cache (turns whose provider does not report it add nothing)',
  }),
  reasoningTokens: Type.Integer({ minimum: 0, description: 'Of outputTokens, the reasoning ones (turns whose provider does not report it add nothing)' }),
  estimatedCostUsd: Type.Union([Type.Number({ minimum: 0 }), Type.Null()], {
    description: 'What the priced turns cost on the user’s own provider keys (sum of exact micro-dollars); null when turns ran and none could be priced',
  }),
  unpricedTurns: Type.Integer({ minimum: 0, description: 'Turns whose cost is unknown (no catalogue prices, no reported cost): not in estimatedCostUsd' }),
  creditsCharged: Type.Integer({ minimum: 0, description: 'Credits the service charged for these turns (the ledger’s turn entries, net of returns)' }),
  allowanceTurns: Type.Integer({ minimum: 0, description: 'Free monthly allowance turns these turns used' }),
};

const UsageRowSchema = named(
  'UsageRow',
  Type.Object({
    key: Type.String({ description: 'The UTC date (groupBy=day), the model id (groupBy=model) or the provider (groupBy=provider)' }),
    provider: Type.Optional(Type.String({ description: 'groupBy=model: the model’s provider (the same model id can run at two providers)' })),
    ...figures,
  }),
);

const UsageSummarySchema = named(
  'UsageSummary',
  Type.Object({
    from: Type.String(),
    to: Type.String(),
    groupBy: Type.Union([Type.Literal('day'), Type.Literal('model'), Type.Literal('provider')]),
    rows: Type.Array(ref(UsageRowSchema), {
      description: 'groupBy=day: every day of the range, oldest first (days without turns as zeros); otherwise the groups with turns',
    }),
    total: Type.Object(figures, { description: 'The whole range: the sum of the rows' }),
  }),
);
export const UsageSummary = ref(UsageSummarySchema);
export type UsageSummaryDto = Static<typeof UsageSummarySchema>;
export type UsageFiguresDto = Static<typeof UsageSummarySchema>['total'];

export const components: NamedSchema[] = [UsageRowSchema, UsageSummarySchema];
