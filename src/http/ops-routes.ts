import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../deps.ts';
import { bearerSecret } from './auth.ts';
import { AppError } from './errors.ts';
import { ErrorEnvelope, responses } from './schemas.ts';

const Status = Type.Object({ status: Type.String() });

/** DESIGN §10: /readyz answers within this whatever the database does (503 when it has not answered). */
export const READINESS_DEADLINE_MS = 2000;

/**
 * How long /readyz waits for the database: well inside the deadline, so the 503 itself (serialising,
 * the event loop of a busy instance, the network) still lands within it. Waiting the whole deadline
 * answered after 2,004–2,025 ms: a probe with a 2 s timeout saw a timeout, not the 503.
 */
export const READINESS_PROBE_BUDGET_MS = 1500;

export async function opsRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const ops = { tags: ['operations'], security: [] };

  app.get('/healthz', { schema: { ...ops, operationId: 'getHealth', summary: 'Process is up', response: responses({ 200: Status }) } }, async () => ({
    status: 'ok',
  }));

  // One probe of the database at a time, shared by every readiness check made meanwhile: a frozen
  // database holds one connection for its statement deadline, not one per check.
  let probe: Promise<boolean> | undefined;
  const databaseAnswers = (): Promise<boolean> => {
    probe ??= sql`select 1`
      .execute(deps.db)
      .then(
        () => true,
        () => false,
      )
      .finally(() => (probe = undefined));
    return withinDeadline(probe, READINESS_PROBE_BUDGET_MS);
  };

  app.get(
    '/readyz',
    {
      schema: {
        ...ops,
        operationId: 'getReadiness',
        summary: 'Database answering and not draining',
        description:
          `503 SERVICE_UNAVAILABLE while draining, or when the database has not answered within ${READINESS_PROBE_BUDGET_MS} ms ` +
          `(the answer lands inside ${READINESS_DEADLINE_MS} ms).`,
        response: responses({ 200: Status }),
      },
    },
    async () => {
      if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'draining', { headers: { 'Retry-After': '5' } });
      if (!(await databaseAnswers())) throw new AppError('SERVICE_UNAVAILABLE', 'database unreachable', { headers: { 'Retry-After': '5' } });
      return { status: 'ready' };
    },
  );

  const description =
    `Loopback clients only (a request relayed by a proxy, with any of ${PROXY_HEADERS_SHOWN}, is not one) → else 404 NOT_FOUND; ` +
    'with METRICS_TOKEN set, only `Authorization: Bearer <METRICS_TOKEN>`, from anywhere → else 401 UNAUTHENTICATED.';
  const exposition = {
    description: 'The Prometheus text exposition format',
    content: { [deps.metrics.registry.contentType]: { schema: Type.String() } },
  };
  app.get(
    '/metrics',
    {
      schema: {
        ...ops,
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description,
        response: responses({ 200: exposition, 401: ErrorEnvelope, 404: ErrorEnvelope }),
      },
    },
    async (req, reply) => {
      admitMetricsReader(req, deps.config.metricsToken);
      const body = await deps.metrics.registry.metrics();
      return reply.type(deps.metrics.registry.contentType).send(body);
    },
  );

  app.get('/openapi.json', { schema: { ...ops, summary: 'OpenAPI 3.1 document', hide: true } }, async () => app.swagger());
}

/** False when the promise has not resolved true within `ms`. */
async function withinDeadline(answer: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/;

/**
 * Headers by which a proxy (a reverse proxy, a load balancer, a CDN) says it relays someone else's
 * request: the standard ones, the de facto X-Forwarded-* family (any of them: a TLS terminator may set
 * only X-Forwarded-Proto), and the client-address headers of nginx and the common CDNs.
 */
const PROXY_HEADERS = ['forwarded', 'via', 'x-real-ip', 'x-client-ip', 'x-cluster-client-ip', 'cf-connecting-ip', 'true-client-ip', 'fastly-client-ip'];
const PROXY_HEADER_PREFIX = 'x-forwarded-';
const PROXY_HEADERS_SHOWN = 'Forwarded, Via, X-Forwarded-*, X-Real-IP, X-Client-IP, X-Cluster-Client-IP, CF-Connecting-IP, True-Client-IP, Fastly-Client-IP';

function relayedByProxy(req: FastifyRequest): boolean {
  return Object.keys(req.headers).some((name) => PROXY_HEADERS.includes(name) || name.startsWith(PROXY_HEADER_PREFIX));
}
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
  if (relayedByProxy(req) || !LOOPBACK.test(req.socket.remoteAddress ?? '')) throw new AppError('NOT_FOUND', `no route GET ${req.url.split('?')[0]}`);
}
