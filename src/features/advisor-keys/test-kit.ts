// Shared by this feature's tests: one loopback fake per provider, and the env that points an app at them.
import { randomUUID } from 'node:crypto';
import type { Provider } from '../../catalogue.ts';
import type { AnthropicFake, GeminiFake, MarketDataFake, OpenAiCompatibleFake, ProbeBehaviour } from '../../../test/fakes/index.ts';
import { startAnthropicFake, startFmpFake, startGeminiFake, startOpenAiCompatibleFake, startPolygonFake } from '../../../test/fakes/index.ts';

export type ProviderFake = OpenAiCompatibleFake | AnthropicFake | GeminiFake;

export interface KeyFakes {
  readonly providers: Record<Provider, ProviderFake>;
  readonly polygon: MarketDataFake;
  readonly fmp: MarketDataFake;
  /** Env for buildTestApp: every provider and Polygon point at the fakes; short probe timeouts. */
  env(extra?: Record<string, string | undefined>): Record<string, string | undefined>;
  /** Every fake back to answering normally. */
  reset(): void;
  close(): Promise<void>;
}

/** Short enough to keep the stall tests quick, long enough for a loaded CI machine's loopback. */
/**
 * The default model a verified key gets from each provider's fake (its default model list) under the
 * built-in catalogue's provider preferences.
 */
export const FAKE_DEFAULT_MODEL: Record<Provider, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-haiku-4-5-20251001',
  google: 'gemini-2.5-flash',
  mistral: 'mistral-small-latest',
  xai: 'grok-3-mini',
  groq: 'llama-3.3-70b-versatile',
  deepseek: 'deepseek-chat',
  openrouter: 'openai/gpt-4o-mini',
};

export const TEST_PROBE_TIMEOUT_MS = 400;

export async function startKeyFakes(opts: { anthropicPageSize?: number; geminiPageSize?: number } = {}): Promise<KeyFakes> {
  const providers: Record<Provider, ProviderFake> = {
    openai: await startOpenAiCompatibleFake({ flavor: 'openai' }),
    anthropic: await startAnthropicFake(opts.anthropicPageSize ? { pageSize: opts.anthropicPageSize } : {}),
    google: await startGeminiFake(opts.geminiPageSize ? { pageSize: opts.geminiPageSize } : {}),
    mistral: await startOpenAiCompatibleFake({ flavor: 'mistral' }),
    xai: await startOpenAiCompatibleFake({ flavor: 'xai' }),
    groq: await startOpenAiCompatibleFake({ flavor: 'groq' }),
    deepseek: await startOpenAiCompatibleFake({ flavor: 'deepseek' }),
    openrouter: await startOpenAiCompatibleFake({ flavor: 'openrouter' }),
  };
  const polygon = await startPolygonFake();
  const fmp = await startFmpFake();
  const all = [...Object.values(providers), polygon, fmp];
  return {
    providers,
    polygon,
    fmp,
    env: (extra = {}) => ({
      ...Object.fromEntries(Object.entries(providers).map(([p, f]) => [`${p.toUpperCase()}_BASE_URL`, f.url])),
      MARKET_DATA_PROVIDER: 'polygon',
      MARKET_DATA_BASE_URL: polygon.url,
      PROVIDER_PROBE_TIMEOUT_MS: String(TEST_PROBE_TIMEOUT_MS),
      MARKET_DATA_PROBE_TIMEOUT_MS: String(TEST_PROBE_TIMEOUT_MS),
      ...extra,
    }),
    reset: () => all.forEach((f) => f.setProbe('ok' satisfies ProbeBehaviour)),
    close: async () => void (await Promise.all(all.map((f) => f.close()))),
  };
}

/** A fresh user id, so no test shares another's rate-limit window. */
export const newUser = (tag = 'u'): string => `${tag}-${randomUUID()}`;
