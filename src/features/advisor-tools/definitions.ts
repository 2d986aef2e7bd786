// The advisor's tools as the model sees them (DESIGN §11): names, descriptions and parameter schemas
// are part of the contract. Each schema closes its object (`additionalProperties: false`).
import { Type, type Static, type TSchema } from 'typebox';
import { BAR_INTERVALS, type BarInterval } from '../../providers/market-data/index.ts';
import type { ToolSpec } from '../../providers/llm/index.ts';

const Symbol = Type.String({
  pattern: '^[A-Za-z0-9.:^-]{1,16}$',
  description: 'Ticker symbol as the exchange lists it, e.g. AAPL, BRK.B, ^GSPC',
});
const Day = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'Calendar date, YYYY-MM-DD' });
const NoParameters = Type.Object({}, { additionalProperties: false });

const QuoteArgs = Type.Object({ symbol: Symbol }, { additionalProperties: false });
const PriceHistoryArgs = Type.Object(
  {
    symbol: Symbol,
    // A plain string enum: Gemini's function declarations take no anyOf/const.
    interval: Type.Unsafe<BarInterval>({ type: 'string', enum: [...BAR_INTERVALS], description: 'Bar length' }),
    from: Day,
    to: Day,
  },
  { additionalProperties: false },
);
const SearchArgs = Type.Object(
  { query: Type.String({ minLength: 1, maxLength: 64, description: 'Company name or part of a symbol' }) },
  { additionalProperties: false },
);

export type QuoteInput = Static<typeof QuoteArgs>;
export type PriceHistoryInput = Static<typeof PriceHistoryArgs>;
export type SearchInput = Static<typeof SearchArgs>;

export const TOOL_NAMES = ['get_quote', 'get_price_history', 'get_market_status', 'search_symbols', 'list_my_accounts'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** Tools that read the market with the user's market-data key: offered only when one is stored. */
export const MARKET_TOOLS: readonly ToolName[] = ['get_quote', 'get_price_history', 'get_market_status', 'search_symbols'];

export interface ToolDefinition {
  readonly name: ToolName;
  readonly description: string;
  readonly parameters: TSchema;
}

export const TOOL_DEFINITIONS: Readonly<Record<ToolName, ToolDefinition>> = {
  get_quote: {
    name: 'get_quote',
    description:
      "The latest price of one symbol: last price, change and change % since the previous close, the day's open, high, low " +
      'and volume, the previous close, when the price was last updated (asOf, UTC), the currency of the prices, the market\'s ' +
      'session when it was read (marketState: open, pre-market, after-hours or closed) and the exchange\'s time zone.',
    parameters: QuoteArgs,
  },
  get_price_history: {
    name: 'get_price_history',
    description:
      'OHLCV bars of one symbol between two dates (both included), oldest first. At most 500 bars: the most recent ones, ' +
      'with truncated: true when the range held more. Use 1day bars for ranges longer than a few days.',
    parameters: PriceHistoryArgs,
  },
  get_market_status: {
    name: 'get_market_status',
    description: 'Whether the US stock market is open, closed or in extended hours right now, with per-exchange states where known.',
    parameters: NoParameters,
  },
  search_symbols: {
    name: 'search_symbols',
    description: 'Up to 10 listed symbols matching a company name or part of a ticker: symbol, name, exchange and type.',
    parameters: SearchArgs,
  },
  list_my_accounts: {
    name: 'list_my_accounts',
    description: "The user's own trading accounts in this journal: name, currency, time zone, brokerage and starting balance.",
    parameters: NoParameters,
  },
};

/** The tools as sent to the provider. */
export function toolSpec(name: ToolName): ToolSpec {
  const d = TOOL_DEFINITIONS[name];
  return { name: d.name, description: d.description, parameters: d.parameters as unknown as Record<string, unknown> };
}
