import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../../deps.ts';
import { ProviderSchema } from '../../catalogue.ts';
import { responses } from '../../http/schemas.ts';
import { MAX_ATTACHMENTS, MAX_TEXT_CHARS } from './schemas.ts';

const AdvisorCatalogue = Type.Object({
  marketDataProvider: Type.Union([Type.Literal('polygon'), Type.Literal('fmp')], {
    description: 'The market-data provider a key saved with PUT /api/advisor/market-data-key is for (MARKET_DATA_PROVIDER)',
  }),
  limits: Type.Object(
    {
      maxTextChars: Type.Integer(),
      maxImagesPerMessage: Type.Integer(),
      maxImageBytes: Type.Integer({ description: 'decoded bytes of one image (MAX_IMAGE_BYTES)' }),
    },
    { description: 'what a message may carry: a client checks before it uploads' },
  ),
  personas: Type.Array(Type.Object({ personaId: Type.String(), name: Type.String() }), {
    description: 'what `personaId` may name (system prompts stay on the server)',
  }),
  providers: Type.Array(
    Type.Object({
      provider: ProviderSchema,
      suggestedModels: Type.Array(Type.String(), { description: 'the first is the default model of a key saved without one' }),
    }),
  ),
  models: Type.Array(
    Type.Object({
      provider: ProviderSchema,
      match: Type.String({ description: 'a model name, where * stands for any run of characters (claude-*-sonnet), matched whole' }),
      allowance: Type.Boolean({ description: 'paid with free monthly allowance turns (else credits)' }),
      creditsPerTurn: Type.Integer(),
      images: Type.Boolean(),
      tools: Type.Boolean(),
    }),
    { description: 'how each model is paid; a model matching no entry answers 402 MODEL_NOT_AVAILABLE' },
  ),
});

/**
 * What a client needs to offer choices the service will accept: personas, suggested models per provider
 * and how each model is paid (the way out of a 402: "switch to an allowance model"). From the catalogue
 * the service runs with (CONFIG_FILE), so it is never out of date.
 */
export async function catalogueRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const { catalogue } = deps.config;
  const body = {
    marketDataProvider: deps.config.marketData.provider,
    limits: { maxTextChars: MAX_TEXT_CHARS, maxImagesPerMessage: MAX_ATTACHMENTS, maxImageBytes: deps.config.maxImageBytes },
    personas: catalogue.personas.map(({ personaId, name }) => ({ personaId, name })),
    providers: Object.entries(catalogue.providerDefaults).map(([provider, models]) => ({
      provider: provider as (typeof catalogue.models)[number]['provider'],
      suggestedModels: models ?? [],
    })),
    models: catalogue.models.map((m) => ({
      provider: m.provider,
      match: m.match,
      allowance: m.allowance,
      creditsPerTurn: m.creditsPerTurn,
      images: m.images ?? true,
      tools: m.tools ?? true,
    })),
  };
  app.get(
    '/advisor/catalogue',
    {
      schema: {
        operationId: 'getAdvisorCatalogue',
        tags: ['advisor conversations'],
        summary: 'Personas, suggested models and how each model is paid',
        response: responses({ 200: AdvisorCatalogue }),
      },
    },
    async () => body,
  );
}
