// The advisor catalogue (personas, suggested models, how models are paid, message limits): what it says
// about a model. No DOM and no fetch (unit-tested under node); api/catalogue.ts loads it.
import { globMatches, isExactModel } from '../../src/model-glob.ts';
import type { Schemas } from './api/client.ts';
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

/** The catalogue entry a model is paid by: the first whose pattern it matches, as the service decides. */
export function modelEntry(c: Catalogue, provider: string, model: string): Catalogue['models'][number] | undefined {
  return c.models.find((m) => m.provider === provider && globMatches(m.match, model));
}

/** How a turn on this model is paid, in a few words: "Free allowance turns", "5 credits per turn". */
export function costWords(c: Catalogue | undefined, provider: string, model: string): string {
  if (!c) return '';
  const entry = modelEntry(c, provider, model);
  if (!entry) return 'Not offered here';
  return entry.allowance ? 'Free allowance turns' : `${entry.creditsPerTurn} credit${entry.creditsPerTurn === 1 ? '' : 's'} per turn`;
}

/**
 * The models a trader can pick for a new conversation: for each provider with a key, the catalogue's
 * suggestions and its exact model names, then the key's default model when it is neither. The order
 * does not depend on which of them is the default, so the list stays put while the trader picks.
 */
export function modelChoices(c: Catalogue | undefined, keys: readonly Key[]): { provider: Provider; models: string[] }[] {
  return keys.map((k) => {
    const suggested = c?.providers.find((p) => p.provider === k.provider)?.suggestedModels ?? [];
    const exact = c?.models.filter((m) => m.provider === k.provider && isExactModel(m.match)).map((m) => m.match) ?? [];
    return { provider: k.provider, models: [...new Set([...suggested, ...exact, k.defaultModel])] };
  });
}
