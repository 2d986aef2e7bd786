import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../deps.ts';
import { responses } from './schemas.ts';

const LocalSignInBody = Type.Object(
  { userId: Type.String({ minLength: 1, maxLength: 128, pattern: '\\S', description: 'any user id; it becomes the token subject' }) },
  { additionalProperties: false },
);
const LocalSession = Type.Object({ token: Type.String(), userId: Type.String(), expiresAt: Type.String({ format: 'date-time' }) });
const LocalSignInAvailable = Type.Object({ available: Type.Literal(true) });

/**
 * DESIGN §2, the web client's sign-in on a developer's machine: the embedded default listening on
 * loopback mints a token for any user id with its generated secret (what `npm run token` does from a
 * shell). Registered only there (`config.localSignIn`); everywhere else both routes are `404 NOT_FOUND`
 * and the page takes a token handed over by the host application.
 */
export async function localSignInRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const signIn = deps.auth.signInLocally;
  if (!signIn) return;
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const schema = { tags: ['local sign-in'], security: [] };
  const description = 'Only on the embedded default listening on loopback (no DATABASE_URL, no AUTH_JWT_SECRET, no AUTH_JWKS_URL); else 404 NOT_FOUND.';
  app.get(
    '/local-sign-in',
    {
      config: { public: true },
      schema: {
        ...schema,
        operationId: 'getLocalSignIn',
        summary: 'Whether local sign-in is offered',
        description,
        response: responses({ 200: LocalSignInAvailable }),
      },
    },
    async () => ({ available: true as const }),
  );
  app.post(
    '/local-sign-in',
    {
      config: { public: true },
      schema: {
        ...schema,
        operationId: 'signInLocally',
        summary: 'A bearer token for a user id (local use)',
        description,
        body: LocalSignInBody,
        response: responses({ 200: LocalSession }),
      },
    },
    async (req) => {
      const userId = req.body.userId.trim();
      return { ...(await signIn(userId)), userId };
    },
  );
}
