import Fastify, { LogController, type FastifyError, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from './deps.ts';
import { traceRequest } from './platform/tracing.ts';
import { AppError, type ErrorCode, type ErrorDetail } from './http/errors.ts';
import { authPlugin } from './http/auth-plugin.ts';
import { opsRoutes } from './http/ops-routes.ts';
import { localSignInRoutes } from './http/local-sign-in.ts';
import { webClientRoutes } from './http/web-client.ts';
import {
  SMALL_BODY_BYTES,
  createClientErrorHandler,
  frameworkError,
  refuseOversizedHeaders,
  refuseUndecodableQuery,
  requestIdOf,
  sendError,
  serverLimits,
  utf8JsonBodies,
} from './http/edge.ts';
import { StreamMessageBody } from './features/conversations/schemas.ts';
import { createValidatorCompiler } from './http/validation.ts';
import { isDatabaseUnavailable } from './db/create-db.ts';
import { accountsRoutes } from './features/accounts/routes.ts';
import { billingRoutes } from './features/billing/routes.ts';
import { advisorKeysRoutes } from './features/advisor-keys/routes.ts';
import { conversationsRoutes } from './features/conversations/routes.ts';
import { catalogueRoutes } from './features/conversations/catalogue-routes.ts';
import { usageRoutes } from './features/usage/routes.ts';
import { journalRoutes } from './features/journal/routes.ts';
import { components as httpComponents, shareErrorResponses } from './http/schemas.ts';
import { sharedSerializers } from './http/serializers.ts';
import { components as accountsComponents } from './features/accounts/schemas.ts';
import { components as billingComponents } from './features/billing/schemas.ts';
import { components as advisorKeysComponents } from './features/advisor-keys/schemas.ts';
import { components as conversationsComponents } from './features/conversations/schemas.ts';
import { components as usageComponents } from './features/usage/schemas.ts';
import { components as journalComponents } from './features/journal/schemas.ts';
import { packageVersion } from './version.ts';
import { keepStatistics } from './db/embedded-statistics.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Route needs no bearer token (payment webhook, operations). */
    public?: boolean;
    /** Code for schema failures on this route (spec: key saves carry their own code). */
    validationCode?: ErrorCode;
  }
}

export type App = Awaited<ReturnType<typeof buildApp>>;

/** Builds the HTTP app from its dependencies; never reads process.env. */
export async function buildApp(deps: Deps) {
  const app = Fastify({
    loggerInstance: deps.logger,
    // One line per request (below) instead of Fastify's two: request logging was half the CPU of a
    // small JSON request. It names the route pattern, never the raw URL, which may hold anything.
    logController: new LogController({ disableRequestLogging: true }),
    // Small JSON routes; the stream routes raise it to MAX_BODY_BYTES (onRoute below), the webhook sets its own.
    bodyLimit: SMALL_BODY_BYTES,
    requestIdHeader: false,
    genReqId: requestIdOf,
    // DESIGN §15: request.ip is X-Forwarded-For's client only when the peer is a proxy TRUST_PROXY names.
    trustProxy: deps.config.trustProxy === false ? false : [...deps.config.trustProxy],
    return503OnClosing: true,
    ...serverLimits(deps.config.requestTimeoutMs),
    // What the server refuses before a route runs is answered in the envelope too (DESIGN §3).
    clientErrorHandler: createClientErrorHandler(deps.logger),
    frameworkErrors: (err, req, reply) => void sendError(frameworkError(err), req, reply),
    // Each distinct response schema compiled once, not once per route and status (start-up time).
    schemaController: { compilersFactory: { buildSerializer: sharedSerializers() } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(createValidatorCompiler());
  await app.register(utf8JsonBodies);
  // Only a message with images needs a large body; every other route keeps the small cap, so a client
  // cannot make the service read and parse megabytes of JSON where a few hundred bytes are expected.
  app.addHook('onRoute', (route) => {
    if (route.bodyLimit === undefined && route.schema?.body === StreamMessageBody) route.bodyLimit = deps.config.maxBodyBytes;
  });
  app.addHook('onRequest', async (req, reply) => {
    traceRequest(deps.tracing, req.raw, req.method, req.routeOptions.url, reply.raw);
    reply.header('x-request-id', req.id);
    refuseOversizedHeaders(req);
    refuseUndecodableQuery(req);
  });
  const statistics = deps.dbKind === 'pglite' ? keepStatistics(deps.db, (err) => app.log.warn({ err }, 'analyzing the embedded database failed')) : undefined;
  if (statistics !== undefined) app.addHook('onClose', async () => statistics.idle());
  app.addHook('onResponse', async (req, reply) => {
    if (statistics !== undefined && req.method !== 'GET' && req.method !== 'HEAD' && reply.statusCode < 400) statistics.afterWrite();
    const route = req.routeOptions.url ?? 'unmatched';
    deps.metrics.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
    const seconds = reply.elapsedTime / 1000;
    deps.metrics.httpDuration.observe({ method: req.method, route }, seconds);
    req.log.info({ method: req.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 100) / 100, ip: req.ip }, 'request');
  });

  app.setErrorHandler((err: FastifyError | AppError, req, reply) => {
    const appError = toAppError(err, req);
    // A 503 is the service refusing on purpose (draining, a store unreachable): worth a line, not a stack.
    if (appError.code === 'SERVICE_UNAVAILABLE') req.log.warn({ code: appError.code, reason: appError.message, cause: causeOf(appError) }, 'request refused');
    else if (appError.status >= 500) req.log.error({ err, code: appError.code }, 'request failed');
    return sendError(appError, req, reply);
  });
  app.setNotFoundHandler((req, reply) => sendError(new AppError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`), req, reply));

  // Named response schemas, shared by every route (`ref(...)`) and documented once under components.schemas.
  for (const schema of [
    ...httpComponents,
    ...accountsComponents,
    ...billingComponents,
    ...advisorKeysComponents,
    ...conversationsComponents,
    ...usageComponents,
    ...journalComponents,
  ]) {
    app.addSchema(schema);
  }
  await app.register(swagger, {
    // A shared schema keeps its `$id` as its component name (the default renames it `def-<n>`).
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transformObject: shareErrorResponses,
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Advisor, accounts and billing API',
        version: packageVersion(),
        description: 'Errors use one envelope `{ error: { code, message, requestId, details? } }`; clients switch on `code`.',
      },
      // Relative: the origin the document was fetched from, so it is right behind any host name; a
      // client generated from a saved copy is given its base URL (README, API).
      servers: [{ url: '/', description: 'The service that served this document' }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
      security: [{ bearerAuth: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  // Client generators name their methods after operationIds: a documented operation without one
  // fails the start, not a generated client.
  app.addHook('onRoute', (route) => {
    if (route.schema?.hide === true || route.method === 'HEAD') return;
    if (typeof route.schema?.operationId !== 'string') throw new Error(`${String(route.method)} ${route.url} has no schema.operationId`);
  });

  await app.register(opsRoutes, { deps });
  await app.register(webClientRoutes);
  await app.register(
    async (api) => {
      await api.register(authPlugin, { deps });
      await api.register(localSignInRoutes, { deps });
      await api.register(accountsRoutes, { deps });
      await api.register(billingRoutes, { deps });
      await api.register(advisorKeysRoutes, { deps });
      await api.register(conversationsRoutes, { deps });
      await api.register(catalogueRoutes, { deps });
      await api.register(usageRoutes, { deps });
      await api.register(journalRoutes, { deps });
    },
    { prefix: '/api' },
  );
  return app;
}

function toAppError(err: FastifyError | AppError, req: FastifyRequest): AppError {
  if (err instanceof AppError) return err;
  if (err.validation) {
    // A route's own validation code covers its body (spec 4.1/4.2); bad params or query stay VALIDATION_ERROR.
    const code = (err.validationContext === 'body' ? req.routeOptions.config.validationCode : undefined) ?? 'VALIDATION_ERROR';
    const details: ErrorDetail[] = err.validation.map((v) => {
      const missing = v.keyword === 'required' ? `/${String((v.params as { missingProperty?: string }).missingProperty ?? '')}` : '';
      const extra = v.keyword === 'additionalProperties' ? `/${String((v.params as { additionalProperty?: string }).additionalProperty ?? '')}` : '';
      const where = err.validationContext ?? 'body';
      return { path: `${v.instancePath}${missing}${extra}` || '/', message: `${where} ${v.message ?? 'is invalid'}` };
    });
    const first = details[0];
    return new AppError(code, first ? `${first.path}: ${first.message}` : 'request is invalid', { details });
  }
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new AppError('PAYLOAD_TOO_LARGE', 'request body is too large');
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new AppError('VALIDATION_ERROR', err.message);
  }
  if (err.statusCode === 503) return new AppError('SERVICE_UNAVAILABLE', 'service is shutting down');
  if (isDatabaseUnavailable(err)) {
    return new AppError('SERVICE_UNAVAILABLE', 'a dependency is unavailable; retry shortly', { headers: { 'Retry-After': '5' }, cause: err });
  }
  return new AppError('INTERNAL', 'internal error');
}

/** The message of what made an error (a store's own failure behind a 503), if any. */
function causeOf(err: Error): string | undefined {
  return err.cause instanceof Error ? err.cause.message : undefined;
}
