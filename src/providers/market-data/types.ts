// What the advisor's market tools read, normalised across market-data providers (DESIGN §11).
// Every figure a provider does not give is null, never a guess.

export interface Quote {
  readonly symbol: string;
  readonly price: number;
  readonly change: number | null;
  readonly changePercent: number | null;
  readonly open: number | null;
  readonly high: number | null;
  readonly low: number | null;
  readonly volume: number | null;
  readonly previousClose: number | null;
  /** When the price was last updated (ISO 8601, UTC). */
  readonly asOf: string;
  /** ISO 4217 code of the prices (`USD`); null when the provider did not say. */
  readonly currency: string | null;
  /** The trading session of the symbol's market when the quote was read; null when the provider did not say. */
  readonly marketState: MarketState | null;
  /** IANA time zone of the exchange (`America/New_York`), for showing `asOf` on its clock; null when unknown. */
  readonly exchangeTimezone: string | null;
}

export type MarketState = 'open' | 'pre-market' | 'after-hours' | 'closed';

export const BAR_INTERVALS = ['1min', '5min', '15min', '1hour', '1day'] as const;
export type BarInterval = (typeof BAR_INTERVALS)[number];

interface HistoryQuery {
  readonly symbol: string;
  readonly interval: BarInterval;
  /** Calendar dates (YYYY-MM-DD), both included. */
  readonly from: string;
  readonly to: string;
}

export interface Bar {
  /** Start of the bar (ISO 8601, UTC). */
  readonly t: string;
  readonly open: number;
  readonly high: number;
  readonly low: number;
  readonly close: number;
  readonly volume: number | null;
}

export interface PriceHistory {
  readonly symbol: string;
  readonly interval: BarInterval;
  /** Oldest first, at most MAX_BARS: the most recent ones. */
  readonly bars: readonly Bar[];
  /** True when the provider had more bars than MAX_BARS in the range. */
  readonly truncated: boolean;
}

export const MAX_BARS = 500;

export interface MarketStatus {
  readonly market: 'open' | 'closed' | 'extended-hours';
  readonly asOf: string;
  /** Per-exchange states where the provider gives them (e.g. `{ nasdaq: 'open' }`). */
  readonly exchanges: Readonly<Record<string, string>> | null;
}

export interface SymbolMatch {
  readonly symbol: string;
  readonly name: string;
  readonly exchange: string | null;
  readonly type: string | null;
}

export const MAX_SYMBOL_MATCHES = 10;

export type MarketDataErrorCode =
  'UNKNOWN_SYMBOL' | 'MARKET_DATA_KEY_INVALID' | 'MARKET_DATA_RATE_LIMITED' | 'MARKET_DATA_UNAVAILABLE' | 'MARKET_DATA_NOT_ENTITLED';

/**
 * A market-data call that did not give data, already mapped (DESIGN §11). `message` is safe to show
 * to the model and the user: it never contains the key or the provider's raw text (which can echo the
 * request URL, and with it FMP's `apikey` parameter).
 */
export class MarketDataError extends Error {
  readonly code: MarketDataErrorCode;
  readonly status: number | undefined;

  constructor(code: MarketDataErrorCode, message: string, status?: number) {
    super(message);
    this.name = 'MarketDataError';
    this.code = code;
    this.status = status;
  }
}

/**
 * The four market reads on one user's key. `signal` carries both the turn's abort and the call's
 * deadline: when it aborts because of the deadline (its reason a TimeoutError), the call rejects with
 * MARKET_DATA_UNAVAILABLE; when it aborts for another reason, with that reason.
 */
export interface MarketReads {
  quote(apiKey: string, symbol: string, signal: AbortSignal): Promise<Quote>;
  priceHistory(apiKey: string, query: HistoryQuery, signal: AbortSignal): Promise<PriceHistory>;
  marketStatus(apiKey: string, signal: AbortSignal): Promise<MarketStatus>;
  searchSymbols(apiKey: string, query: string, signal: AbortSignal): Promise<SymbolMatch[]>;
}
