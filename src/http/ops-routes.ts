import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../deps.ts';
import { AppError } from './errors.ts';
import { responses } from './schemas.ts';

const Status = Type.Object({ status: Type.String() });

export async function opsRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const ops = { tags: ['operations'], security: [] };

  app.get('/healthz', { schema: { ...ops, operationId: 'getHealth', summary: 'Process is up', response: responses({ 200: Status }) } }, async () => ({
    status: 'ok',
  }));

  app.get(
    '/readyz',
    { schema: { ...ops, operationId: 'getReadiness', summary: 'Database reachable and not draining', response: responses({ 200: Status }) } },
    async () => {
      if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'draining', { headers: { 'Retry-After': '5' } });
      try {
        await sql`select 1`.execute(deps.db);
      } catch {
        throw new AppError('SERVICE_UNAVAILABLE', 'database unreachable', { headers: { 'Retry-After': '5' } });
      }
      return { status: 'ready' };
    },
  );

  app.get('/metrics', { schema: { ...ops, operationId: 'getMetrics', summary: 'Prometheus metrics', produces: ['text/plain'] } }, async (_req, reply) => {
    const body = await deps.metrics.registry.metrics();
    return reply.type(deps.metrics.registry.contentType).send(body);
  });

  app.get('/openapi.json', { schema: { ...ops, summary: 'OpenAPI 3.1 document', hide: true } }, async () => app.swagger());
}
