import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { AppError } from './errors.ts';
import { bearerToken, missingTokenReason } from './auth.ts';
import { ensureUser } from '../features/users/service.ts';

interface RequestUser {
  readonly id: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    user: RequestUser;
  }
}

function queryToken(query: unknown): string | undefined {
  const value = (query as Record<string, unknown> | undefined)?.['access_token'];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/**
 * Authenticates every route of the scope it is registered in, before the body is read, so an
 * unauthenticated caller learns nothing about validation. Routes with `config.public` are exempt.
 */
export const authPlugin = fp(async (app: FastifyInstance, { deps }: { deps: Deps }) => {
  // Fastify wants the property declared up front (stable object shape); every authenticated route sets it.
  app.decorateRequest('user', null as unknown as RequestUser);
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config.public) return;
    const token =
      bearerToken(req.headers.authorization) ??
      (req.routeOptions.config.queryToken && req.headers.authorization === undefined ? queryToken(req.query) : undefined);
    if (!token) throw new AppError('UNAUTHENTICATED', missingTokenReason(req.headers.authorization));
    const user = await deps.auth.verify(token);
    await ensureUser(deps, user.id, user.tierClaim);
    req.user = { id: user.id };
  });
});
