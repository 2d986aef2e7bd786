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

/**
 * Authenticates every route of the scope it is registered in, before the body is read, so an
 * unauthenticated caller learns nothing about validation. Routes with `config.public` are exempt. The
 * token comes only in the Authorization header: never from the URL (issue 41 item 8: proxies and access
 * logs record URLs), so `?access_token=` is no token at all.
 */
export const authPlugin = fp(async (app: FastifyInstance, { deps }: { deps: Deps }) => {
  // Fastify wants the property declared up front (stable object shape); every authenticated route sets it.
  app.decorateRequest('user', null as unknown as RequestUser);
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config.public) return;
    const token = bearerToken(req.headers.authorization);
    if (!token) throw new AppError('UNAUTHENTICATED', missingTokenReason(req.headers.authorization));
    const user = await deps.auth.verify(token);
    await ensureUser(deps, user.id, user.tierClaim);
    req.user = { id: user.id };
  });
});
