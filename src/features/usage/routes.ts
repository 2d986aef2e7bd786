import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../../deps.ts';
import { responses } from '../../http/schemas.ts';
import { UsageQuery, UsageSummary } from './schemas.ts';
import { usageSummary } from './service.ts';

export async function usageRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/advisor/usage',
    {
      schema: {
        operationId: 'getAdvisorUsage',
        tags: ['advisor usage'],
        summary: 'What the advisor spent, per day, model or provider (DESIGN §13)',
        description:
          'Turns that ended between `from` and `to` (UTC dates, both included, at most 366 days; default the last 30 days): ' +
          'tokens and estimated cost as the providers reported them on the caller’s own keys, and what the service charged ' +
          '(credits, allowance turns). A range that is not a pair of calendar dates in order, or longer than 366 days, is ' +
          '400 VALIDATION_ERROR.',
        querystring: UsageQuery,
        response: responses({ 200: UsageSummary }),
      },
    },
    async (req) => usageSummary(deps, req.user.id, req.query),
  );
}
