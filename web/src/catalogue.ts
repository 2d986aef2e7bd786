// The advisor catalogue (personas, suggested models, how models are paid, message limits), loaded once.
import { api, must, type Schemas } from './api/client.ts';
import type { operations } from './api/schema';

export type Catalogue = operations['getAdvisorCatalogue']['responses'][200]['content']['application/json'];
export type Provider = Schemas['ProviderKeyListItem']['provider'];
type Key = Schemas['ProviderKeyListItem'];

export const PROVIDERS: { id: Provider; name: string }[] = [
  { id: 'openai', name: 'OpenAI' },
  { id: 'anthropic', name: 'Anthropic' },
  { id: 'google', name: 'Google Gemini' },
  { id: 'mistral', name: 'Mistral' },
  { id: 'xai', name: 'xAI' },
  { id: 'groq', name: 'Groq' },
  { id: 'deepseek', name: 'DeepSeek' },
  { id: 'openrouter', name: 'OpenRouter' },
];
export const providerName = (p: string): string => PROVIDERS.find((x) => x.id === p)?.name ?? p;

const MARKET_DATA_NAMES: Record<Catalogue['marketDataProvider'], string> = { polygon: 'Polygon', fmp: 'Financial Modeling Prep' };
export const marketDataName = (p: Catalogue['marketDataProvider']): string => MARKET_DATA_NAMES[p];

let pending: Promise<Catalogue> | undefined;
export function loadCatalogue(): Promise<Catalogue> {
  pending ??= must(api.GET('/api/advisor/catalogue')).catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}

/** The catalogue entry a model is paid by (an exact name, or a prefix ending in `*`). */
export function modelEntry(c: Catalogue, provider: string, model: string): Catalogue['models'][number] | undefined {
  return c.models.find((m) => m.provider === provider && (m.match.endsWith('*') ? model.startsWith(m.match.slice(0, -1)) : m.match === model));
}

/** How a turn on this model is paid, in a few words: "Free allowance turns", "5 credits per turn". */
export function costWords(c: Catalogue | undefined, provider: string, model: string): string {
  if (!c) return '';
  const entry = modelEntry(c, provider, model);
  if (!entry) return 'Not offered here';
  return entry.allowance ? 'Free allowance turns' : `${entry.creditsPerTurn} credit${entry.creditsPerTurn === 1 ? '' : 's'} per turn`;
}

/**
 * The models a trader can pick for a new conversation: for each provider with a key, its current
 * default model, the catalogue's suggestions and the catalogue's exact model names, in that order.
 */
export function modelChoices(c: Catalogue | undefined, keys: readonly Key[]): { provider: Provider; models: string[] }[] {
  return keys.map((k) => {
    const suggested = c?.providers.find((p) => p.provider === k.provider)?.suggestedModels ?? [];
    const exact = c?.models.filter((m) => m.provider === k.provider && !m.match.endsWith('*')).map((m) => m.match) ?? [];
    return { provider: k.provider, models: [...new Set([k.defaultModel, ...suggested, ...exact])] };
  });
}
