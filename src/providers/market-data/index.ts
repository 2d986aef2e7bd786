import type { Dispatcher } from 'undici';
import type { MarketDataProvider } from '../../config.ts';
import { FmpReads } from './fmp.ts';
import type { ReadCall } from './http.ts';
import { PolygonReads } from './polygon.ts';
import { probeMarketDataKey, type MarketDataProbeResult } from './probes.ts';
import type { MarketReads } from './types.ts';

export * from './types.ts';

/** The configured market-data provider as the service uses it, on each user's own key. */
export interface MarketData extends MarketReads {
  readonly provider: MarketDataProvider;
  /** Spec 4.1: verifies a key against the provider, within the probe timeout. */
  probe(apiKey: string): Promise<MarketDataProbeResult>;
}

export interface MarketDataOptions {
  readonly provider: MarketDataProvider;
  readonly baseUrl: string;
  readonly probeTimeoutMs: number;
  readonly agent: Dispatcher;
}

export function createMarketData(opts: MarketDataOptions): MarketData {
  const reads = opts.provider === 'polygon' ? new PolygonReads(opts.baseUrl) : new FmpReads(opts.baseUrl);
  const call = (signal: AbortSignal): ReadCall => ({ signal, dispatcher: opts.agent });
  return {
    provider: opts.provider,
    probe: (apiKey) => probeMarketDataKey(opts.provider, apiKey, { baseUrl: opts.baseUrl, timeoutMs: opts.probeTimeoutMs, dispatcher: opts.agent }),
    quote: (apiKey, symbol, signal) => reads.quote(apiKey, symbol, call(signal)),
    priceHistory: (apiKey, query, signal) => reads.priceHistory(apiKey, query, call(signal)),
    marketStatus: (apiKey, signal) => reads.marketStatus(apiKey, call(signal)),
    searchSymbols: (apiKey, query, signal) => reads.searchSymbols(apiKey, query, call(signal)),
  };
}
