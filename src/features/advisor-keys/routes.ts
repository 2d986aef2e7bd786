import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../../deps.ts';
import { enforceRateLimit } from '../../http/rate-limit.ts';
import { NoContent, responses } from '../../http/schemas.ts';
import type { RateLimitRule } from '../../platform/rate-limiter.ts';
import * as marketData from './market-data-service.ts';
import {
  MarketDataKeyStatus,
  ProviderKeyList,
  ProviderKeyListItem,
  ProviderParams,
  SavedProviderKey,
  SaveMarketDataKeyBody,
  SaveProviderKeyBody,
  UpdateProviderKeyBody,
} from './schemas.ts';
import * as service from './service.ts';

const HOUR_MS = 3_600_000;
/** DESIGN §4: every provider together. */
const PROVIDER_KEY_SAVES: RateLimitRule = { name: 'provider-key-saves', limit: 10, windowMs: HOUR_MS };
const MARKET_DATA_KEY_SAVES: RateLimitRule = { name: 'market-data-key-saves', limit: 10, windowMs: HOUR_MS };

export async function advisorKeysRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  // Route-level onRequest: after authentication, before the body is read, so every attempt counts
  // whatever its outcome (bad body, rejected key) and a refused one reaches no provider.
  const limited = (rule: RateLimitRule) => async (req: FastifyRequest, reply: FastifyReply) => enforceRateLimit(deps.limiter, rule, req.user.id, reply);
  const tags = ['advisor keys'];

  app.put(
    '/advisor/provider-keys/:provider',
    {
      onRequest: limited(PROVIDER_KEY_SAVES),
      config: { validationCode: 'PROVIDER_KEY_INVALID' },
      schema: {
        operationId: 'saveProviderKey',
        tags,
        summary: 'Save or replace a language-model provider key (spec 4.2)',
        description:
          'Verifies the key with the provider (5 s). Rejected → 400 PROVIDER_KEY_INVALID, nothing stored; timeout, 429 or 5xx → ' +
          'stored with verified false. The saved key becomes the active one. 10 saves per user per rolling hour, all providers together.',
        params: ProviderParams,
        body: SaveProviderKeyBody,
        response: responses({ 200: SavedProviderKey }),
      },
    },
    async (req) => service.saveProviderKey(deps, req.user.id, req.params.provider, req.body),
  );
  app.get(
    '/advisor/provider-keys',
    { schema: { operationId: 'listProviderKeys', tags, summary: "List the caller's provider keys", response: responses({ 200: ProviderKeyList }) } },
    async (req) => ({ items: await service.listProviderKeys(deps, req.user.id) }),
  );
  app.patch(
    '/advisor/provider-keys/:provider',
    {
      schema: {
        operationId: 'updateProviderKey',
        tags,
        summary: 'Change the default model or the active flag of a key',
        params: ProviderParams,
        body: UpdateProviderKeyBody,
        response: responses({ 200: ProviderKeyListItem }),
      },
    },
    async (req) => service.updateProviderKey(deps, req.user.id, req.params.provider, req.body),
  );
  app.delete(
    '/advisor/provider-keys/:provider',
    { schema: { operationId: 'deleteProviderKey', tags, summary: 'Delete a provider key', params: ProviderParams, response: responses({ 204: NoContent }) } },
    async (req, reply) => {
      await service.deleteProviderKey(deps, req.user.id, req.params.provider);
      return reply.code(204).send(null);
    },
  );

  app.put(
    '/advisor/market-data-key',
    {
      onRequest: limited(MARKET_DATA_KEY_SAVES),
      config: { validationCode: 'MARKET_DATA_KEY_INVALID' },
      schema: {
        operationId: 'saveMarketDataKey',
        tags,
        summary: 'Save or replace the market-data key (spec 4.1)',
        description:
          'Verifies the key with the configured provider. Rejected (401/403) → 400 MARKET_DATA_KEY_INVALID, nothing stored; ' +
          'timeout, 429 or 5xx → stored with verified false. 10 saves per user per rolling hour.',
        body: SaveMarketDataKeyBody,
        response: responses({ 200: MarketDataKeyStatus }),
      },
    },
    async (req) => marketData.saveMarketDataKey(deps, req.user.id, req.body),
  );
  app.get(
    '/advisor/market-data-key',
    {
      schema: {
        operationId: 'getMarketDataKeyStatus',
        tags,
        summary: 'Market-data key status',
        description: '`configured: false` (with nulls) when no key is saved.',
        response: responses({ 200: MarketDataKeyStatus }),
      },
    },
    async (req) => marketData.marketDataKeyStatus(deps, req.user.id),
  );
  app.delete(
    '/advisor/market-data-key',
    { schema: { operationId: 'deleteMarketDataKey', tags, summary: 'Delete the market-data key', response: responses({ 204: NoContent }) } },
    async (req, reply) => {
      await marketData.deleteMarketDataKey(deps, req.user.id);
      return reply.code(204).send(null);
    },
  );
}
