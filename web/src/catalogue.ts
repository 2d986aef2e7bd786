// The advisor catalogue (personas, suggested models, how models are paid, message limits), loaded once.
import { api, must, type Schemas } from './api/client.ts';
import type { operations } from './api/schema';

export type Catalogue = operations['getAdvisorCatalogue']['responses'][200]['content']['application/json'];
export type Provider = Schemas['ProviderKeyListItem']['provider'];

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
