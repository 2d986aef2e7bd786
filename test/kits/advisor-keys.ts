// Shared by the advisor-keys tests (and those of features that need a saved key): one loopback fake per provider, and the env that points an app at them.
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach } from 'node:test';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { ManualClock } from '../helpers/manual-clock.ts';
import type { Provider } from '../../src/catalogue.ts';
import type { Deps } from '../../src/deps.ts';
import { AppError } from '../../src/http/errors.ts';
import { openTurnKeys, readTurnKeys, type UsableProviderKey } from '../../src/features/advisor-keys/service.ts';
import type { AnthropicFake, GeminiFake, MarketDataFake, OpenAiCompatibleFake, ProbeBehaviour } from '../fakes/index.ts';
import { startAnthropicFake, startFmpFake, startGeminiFake, startOpenAiCompatibleFake, startPolygonFake } from '../fakes/index.ts';

export type ProviderFake = OpenAiCompatibleFake | AnthropicFake | GeminiFake;

export interface KeyFakes {
  readonly providers: Record<Provider, ProviderFake>;
  readonly polygon: MarketDataFake;
  readonly fmp: MarketDataFake;
  /**
   * Env for buildTestApp: every provider and Polygon point at the fakes, with the probe deadline for
   * fakes that answer (the default) or for fakes told to stall.
   */
  env(extra?: Record<string, string | undefined>, deadline?: keyof typeof PROBE_DEADLINE_MS): Record<string, string | undefined>;
  /** Every fake back to answering normally. */
  reset(): void;
  close(): Promise<void>;
}

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

/**
 * Key-probe deadlines. A probe the fake answers must never meet its deadline, however loaded the
 * machine: far above any loopback delay. A probe of a stalled fake (it never answers) meets the
 * deadline whatever its value: short only to keep those tests quick. An app serves one or the other,
 * never both (a short deadline on an answered probe stores the key unverified once the machine is busy).
 */
export const PROBE_DEADLINE_MS = { answered: 60_000, stalled: 200 } as const;

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
    env: (extra = {}, deadline = 'answered') => ({
      ...Object.fromEntries(Object.entries(providers).map(([p, f]) => [`${p.toUpperCase()}_BASE_URL`, f.url])),
      MARKET_DATA_PROVIDER: 'polygon',
      MARKET_DATA_BASE_URL: polygon.url,
      PROVIDER_PROBE_TIMEOUT_MS: String(PROBE_DEADLINE_MS[deadline]),
      MARKET_DATA_PROBE_TIMEOUT_MS: String(PROBE_DEADLINE_MS[deadline]),
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
  /** A second instance on t's database and clock, its probes under the stalled deadline: for the tests that stall a fake. */
  stalled(): Promise<TestApp>;
  readonly fakes: KeyFakes;
  readonly clock: ManualClock;
  put(user: string, provider: string, body: unknown): ReturnType<TestApp['call']>;
  list(user: string): Promise<ProviderKeyItem[]>;
  valid(p: Provider): string;
}

/** Registers the hooks of a provider-keys suite: every fake, an app on them, probes reset before each test. */
export function useProviderKeysApp(): ProviderKeysApp {
  let t: TestApp | undefined;
  let stalled: Promise<TestApp> | undefined;
  let fakes: KeyFakes | undefined;
  const clock = new ManualClock(new Date('2030-01-01T00:00:00Z'));
  before(async () => {
    fakes = await startKeyFakes();
    t = await buildTestApp({ clock, env: fakes.env() });
  });
  after(async () => {
    await (await stalled)?.close();
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
    stalled: () => (stalled ??= buildTestApp({ clock, env: app.fakes.env({}, 'stalled'), shareWith: app.t })),
    clock,
    put: (user, provider, body) => app.t.call('PUT', `/api/advisor/provider-keys/${provider}`, { user, body }),
    list: async (user) => (await app.t.call('GET', '/api/advisor/provider-keys', { user })).json<{ items: ProviderKeyItem[] }>().items,
    valid: (p) => app.fakes.providers[p].validKey,
  };
  return app;
}

/** The provider key a turn would run on (the active one, or `provider`'s), or its refusal thrown. */
export async function usableKey(deps: Deps, userId: string, provider: Provider | null = null): Promise<UsableProviderKey> {
  const { key } = openTurnKeys(deps, provider, await readTurnKeys(deps, userId, provider));
  if (key instanceof AppError) throw key;
  return key;
}
