import type { Dispatcher } from 'undici';
import type { MarketDataProvider } from '../../config.ts';
import { probeMarketDataKey, type MarketDataProbeResult } from './probes.ts';

export type { MarketDataProbeResult } from './probes.ts';

/** The configured market-data provider as the service uses it, on each user's own key. */
export interface MarketData {
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
  return {
    provider: opts.provider,
    probe: (apiKey) => probeMarketDataKey(opts.provider, apiKey, { baseUrl: opts.baseUrl, timeoutMs: opts.probeTimeoutMs, dispatcher: opts.agent }),
  };
}
