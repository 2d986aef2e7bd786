// Shared by this feature's tests: one loopback fake per provider, and the env that points an app at them.
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach } from 'node:test';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import type { Provider } from '../../catalogue.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { keysForTurn, type UsableProviderKey } from './service.ts';
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

export type ProviderKeyItem = {
  provider: string;
  keyHintTail: string;
  defaultModel: string;
  active: boolean;
  verified: boolean;
  lastVerifiedAt: string | null;
  rejectedAt: string | null;
  rejectedReason: string | null;
  createdAt: string;
  updatedAt: string;
};

export interface ProviderKeysApp {
  /** The app and the fakes, started before the suite and closed after it. */
  readonly t: TestApp;
  readonly fakes: KeyFakes;
  readonly clock: ManualClock;
  put(user: string, provider: string, body: unknown): ReturnType<TestApp['call']>;
  list(user: string): Promise<ProviderKeyItem[]>;
  valid(p: Provider): string;
}

/** Registers the hooks of a provider-keys suite: every fake, an app on them, probes reset before each test. */
export function useProviderKeysApp(): ProviderKeysApp {
  let t: TestApp | undefined;
  let fakes: KeyFakes | undefined;
  const clock = new ManualClock(new Date('2030-01-01T00:00:00Z'));
  before(async () => {
    fakes = await startKeyFakes();
    t = await buildTestApp({ clock, env: fakes.env() });
  });
  after(async () => {
    await t?.close();
    await fakes?.close();
  });
  beforeEach(() => fakes?.reset());
  const app: ProviderKeysApp = {
    get t() {
      if (!t) throw new Error('the test app did not start');
      return t;
    },
    get fakes() {
      if (!fakes) throw new Error('the fakes did not start');
      return fakes;
    },
    clock,
    put: (user, provider, body) => app.t.call('PUT', `/api/advisor/provider-keys/${provider}`, { user, body }),
    list: async (user) => (await app.t.call('GET', '/api/advisor/provider-keys', { user })).json<{ items: ProviderKeyItem[] }>().items,
    valid: (p) => app.fakes.providers[p].validKey,
  };
  return app;
}

/** The provider key a turn would run on (the active one, or `provider`'s), or its refusal thrown. */
export async function usableKey(deps: Deps, userId: string, provider: Provider | null = null): Promise<UsableProviderKey> {
  const { key } = await keysForTurn(deps, userId, provider);
  if (key instanceof AppError) throw key;
  return key;
}
