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

const Account = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'The account’s name (or part of it) or id, as list_my_accounts shows; leave out when the user has one account',
});
const JournalArgs = Type.Object({ account: Type.Optional(Account), from: Day, to: Day }, { additionalProperties: false });
const TradesArgs = Type.Object(
  {
    account: Type.Optional(Account),
    from: Day,
    to: Day,
    symbol: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9.:^/-]{1,24}$', description: 'Only this symbol' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'At most this many trades, newest first (default 50)' })),
  },
  { additionalProperties: false },
);
const Price = (description: string) => Type.Number({ minimum: 0, description });
const PositionSizeArgs = Type.Object(
  {
    account: Type.Optional(Account),
    entry: Price('Planned entry price'),
    stop: Price('Stop-loss price (below the entry for a long, above for a short)'),
    riskPercent: Type.Number({ exclusiveMinimum: 0, maximum: 100, description: 'Share of the balance to risk, in percent (1 = 1 %)' }),
    balance: Type.Optional(Price('Balance to size against; default the account’s balance from its journal')),
    symbol: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z0-9.:^/-]{1,24}$',
        description: 'The instrument; a futures root or contract (ES, MESZ5, /NQ) sizes in contracts at its exchange multiplier',
      }),
    ),
    multiplier: Type.Optional(
      Type.Number({ exclusiveMinimum: 0, description: 'What one unit is worth per point of price (ES 50, an option 100); default from symbol, else 1' }),
    ),
  },
  { additionalProperties: false },
);
// Plain string enums: Gemini's function declarations take no anyOf/const.
const TripSide = Type.Unsafe<'long' | 'short'>({ type: 'string', enum: ['long', 'short'], description: 'Only long or only short round trips' });
const ReportBy = Type.Unsafe<'symbol' | 'tag' | 'side' | 'weekday' | 'hour' | 'holdTime'>({
  type: 'string',
  enum: ['symbol', 'tag', 'side', 'weekday', 'hour', 'holdTime'],
  description: 'Group by symbol, tag, side (long/short), weekday (of the opening), hour (00–23 of the opening) or holdTime',
});
const Exclusions = Type.Array(Type.String({ pattern: '^(weekday|tag|symbol|hour|side|holdTime):.{1,40}$' }), {
  maxItems: 10,
  description:
    'What-if: leave out round trips matching any of these, e.g. ["weekday:fri", "tag:revenge", "symbol:TSLA", "hour:15", "side:short", "holdTime:<1m"]',
});
const RoundTripsArgs = Type.Object(
  {
    account: Type.Optional(Account),
    from: Day,
    to: Day,
    symbol: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9.:^/-]{1,24}$', description: 'Only this symbol' })),
    tag: Type.Optional(Type.String({ minLength: 1, maxLength: 32, description: 'Only round trips with this tag' })),
    side: Type.Optional(TripSide),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'At most this many, newest close first (default 50)' })),
  },
  { additionalProperties: false },
);
const ReportArgs = Type.Object(
  { account: Type.Optional(Account), from: Day, to: Day, by: ReportBy, exclude: Type.Optional(Exclusions) },
  { additionalProperties: false },
);

export type QuoteInput = Static<typeof QuoteArgs>;
export type JournalInput = Static<typeof JournalArgs>;
export type TradesInput = Static<typeof TradesArgs>;
export type PositionSizeInput = Static<typeof PositionSizeArgs>;
export type RoundTripsInput = Static<typeof RoundTripsArgs>;
export type ReportInput = Static<typeof ReportArgs>;
export type PriceHistoryInput = Static<typeof PriceHistoryArgs>;
export type SearchInput = Static<typeof SearchArgs>;

export const TOOL_NAMES = [
  'get_quote',
  'get_price_history',
  'get_market_status',
  'search_symbols',
  'list_my_accounts',
  'get_journal',
  'list_trades',
  'position_size',
  'get_round_trips',
  'get_journal_report',
] as const;
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
      "and volume, the previous close, when the price was last updated (asOf, UTC), the currency of the prices, the market's " +
      "session when it was read (marketState: open, pre-market, after-hours or closed) and the exchange's time zone.",
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
  get_journal: {
    name: 'get_journal',
    description:
      "The user's trading journal of one account between two trading days (both included, at most three years apart): realized and net P&L, " +
      'fees, round trips, wins and losses, win rate, profit factor, expectancy, average and largest win and loss, max drawdown, the daily figures ' +
      '(the 60 most recent days with fills), open positions at the end of the range, and the balance. FIFO, exact; amounts are decimal strings in the ' +
      'account’s currency.',
    parameters: JournalArgs,
  },
  list_trades: {
    name: 'list_trades',
    description:
      "The user's recorded trades (fills) of one account between two trading days, newest first: symbol, side, quantity, price, fee, when, note and tags.",
    parameters: TradesArgs,
  },
  position_size: {
    name: 'position_size',
    description:
      'How many shares (or contracts) to buy or sell so that a move from entry to stop loses riskPercent of the balance: shares = floor(balance × ' +
      'riskPercent / 100 / (|entry − stop| × multiplier)), with the risk amount, the risk per share, the multiplier, the position value ' +
      '(shares × entry × multiplier) and exceedsBalance (true when the position is worth more than the balance: it needs margin or leverage — say so). ' +
      'Exact arithmetic; the balance is the account’s (from its journal) unless given.',
    parameters: PositionSizeArgs,
  },
  get_round_trips: {
    name: 'get_round_trips',
    description:
      "The user's round trips (a symbol's position from flat back to flat) of one account that closed between two trading days, newest first: " +
      'side, open and close time, hold time, size, entry and exit average, realized and net P&L, fees, initial risk and R multiple (when a stop ' +
      'was recorded), tags. Exact; amounts in the account’s currency.',
    parameters: RoundTripsArgs,
  },
  get_journal_report: {
    name: 'get_journal_report',
    description:
      "The user's round trips of one account that closed between two trading days, grouped by symbol, tag, side, weekday, hour or hold time: per " +
      'group and in total net P&L, round trips, wins, losses, win rate, profit factor, expectancy, average and largest win and loss, max drawdown, ' +
      'average R and R expectancy. With exclude, the what-if: the same figures without those round trips (e.g. "what if I stopped trading ' +
      'Fridays": exclude ["weekday:fri"]). Use it to answer where the user makes or loses money.',
    parameters: ReportArgs,
  },
};

/**
 * The tools as sent to the provider: one frozen object per tool, so that a provider serialises each
 * once (tool-wire `specsJson`), not on every turn (about 9 KB of JSON schema for all of them).
 */
const SPECS = new Map<ToolName, ToolSpec>();
export function toolSpec(name: ToolName): ToolSpec {
  let spec = SPECS.get(name);
  if (spec === undefined) {
    const d = TOOL_DEFINITIONS[name];
    spec = Object.freeze({ name: d.name, description: d.description, parameters: d.parameters as unknown as Record<string, unknown> });
    SPECS.set(name, spec);
  }
  return spec;
}
