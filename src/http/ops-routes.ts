import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../deps.ts';
import { bearerSecret } from './auth.ts';
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

  const description =
    'Loopback clients only (a request relayed by a proxy, with Forwarded or X-Forwarded-For, is not one) → else 404 NOT_FOUND; ' +
    'with METRICS_TOKEN set, only `Authorization: Bearer <METRICS_TOKEN>`, from anywhere → else 401 UNAUTHENTICATED.';
  app.get('/metrics', { schema: { ...ops, operationId: 'getMetrics', summary: 'Prometheus metrics', description, produces: ['text/plain'] } }, async (req, reply) => {
    admitMetricsReader(req, deps.config.metricsToken);
    const body = await deps.metrics.registry.metrics();
    return reply.type(deps.metrics.registry.contentType).send(body);
  });

  app.get('/openapi.json', { schema: { ...ops, summary: 'OpenAPI 3.1 document', hide: true } }, async () => app.swagger());
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/;
const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * DESIGN §10: metrics show credits granted and traffic. Without METRICS_TOKEN they are for the host
 * itself (a scraper beside the process); a request a local proxy relays names its real client, so it
 * is not taken for a local one. With METRICS_TOKEN, the token is what admits, from any address.
 */
function admitMetricsReader(req: FastifyRequest, token: string | undefined): void {
  if (token !== undefined) {
    const given = bearerSecret(req.headers.authorization);
    if (given === undefined || !timingSafeEqual(digest(given), digest(token))) {
      throw new AppError('UNAUTHENTICATED', 'metrics need the metrics bearer token');
    }
    return;
  }
  const relayed = req.headers.forwarded !== undefined || req.headers['x-forwarded-for'] !== undefined;
  if (relayed || !LOOPBACK.test(req.socket.remoteAddress ?? '')) throw new AppError('NOT_FOUND', `no route GET ${req.url.split('?')[0]}`);
}
