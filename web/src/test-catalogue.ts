// A catalogue as the service sends it, for the unit tests of what the page says about models.
import type { Catalogue } from './catalogue.ts';

const paid = (provider: Catalogue['models'][number]['provider'], match: string, allowance: boolean, creditsPerTurn: number) => ({
  provider,
  match,
  allowance,
  creditsPerTurn,
  images: true,
  tools: true,
});

export const CATALOGUE: Catalogue = {
  marketDataProvider: 'polygon',
  limits: { maxTextChars: 8000, maxImagesPerMessage: 4, maxImageBytes: 5_000_000 },
  personas: [{ personaId: 'coach', name: 'Trading coach' }],
  providers: [
    { provider: 'openai', suggestedModels: ['gpt-4o-mini', 'gpt-4o'] },
    { provider: 'anthropic', suggestedModels: ['claude-3-5-sonnet'] },
  ],
  models: [
    paid('openai', 'gpt-4o-mini', true, 1),
    paid('openai', 'gpt-4o', false, 5),
    paid('openai', 'o*-mini', false, 2),
    paid('anthropic', 'claude-*-sonnet', false, 3),
    paid('anthropic', 'claude-*', false, 8),
  ],
};
