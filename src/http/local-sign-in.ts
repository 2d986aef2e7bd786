import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../deps.ts';
import { AppError } from './errors.ts';
import { ErrorEnvelope, responses } from './schemas.ts';

const LocalSignInBody = Type.Object(
  { userId: Type.String({ minLength: 1, maxLength: 128, pattern: '\\S', description: 'any user id; it becomes the token subject' }) },
  { additionalProperties: false },
);
const LocalSession = Type.Object({ token: Type.String(), userId: Type.String(), expiresAt: Type.String({ format: 'date-time' }) });
const LocalSignInAvailable = Type.Object({ available: Type.Literal(true) });

/**
 * DESIGN §2, the web client's sign-in on a developer's machine: the embedded default listening on
 * loopback mints a token for any user id with its generated secret (what `npm run token` does from a
 * shell). Offered only there (`config.localSignIn`); everywhere else both routes answer `404 NOT_FOUND`
 * as an unknown route does (before the body is read), and the page takes a token handed over by the
 * host application. They are registered everywhere, so every deployment's OpenAPI document has them.
 */
export async function localSignInRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const signIn = deps.auth.signInLocally;
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const onRequest = async (req: FastifyRequest) => {
    if (!signIn) throw new AppError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`);
  };
  const schema = { tags: ['local sign-in'], security: [] };
  const description = 'Only on the embedded default listening on loopback (no DATABASE_URL, no AUTH_JWT_SECRET, no AUTH_JWKS_URL); else 404 NOT_FOUND.';
  app.get(
    '/local-sign-in',
    {
      config: { public: true },
      onRequest,
      schema: {
        ...schema,
        operationId: 'getLocalSignIn',
        summary: 'Whether local sign-in is offered',
        description,
        response: responses({ 200: LocalSignInAvailable, 404: ErrorEnvelope }),
      },
    },
    async () => ({ available: true as const }),
  );
  app.post(
    '/local-sign-in',
    {
      config: { public: true },
      onRequest,
      schema: {
        ...schema,
        operationId: 'signInLocally',
        summary: 'A bearer token for a user id (local use)',
        description,
        body: LocalSignInBody,
        response: responses({ 200: LocalSession, 404: ErrorEnvelope }),
      },
    },
    async (req) => {
      if (!signIn) throw new AppError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`);
      const userId = req.body.userId.trim();
      return { ...(await signIn(userId)), userId };
    },
  );
}
