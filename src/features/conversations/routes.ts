import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { enforceRateLimit } from '../../http/rate-limit.ts';
import { IdParams, NoContent, responses } from '../../http/schemas.ts';
import type { RateLimitRule } from '../../platform/rate-limiter.ts';
import { relayTurn, replayTurn } from './relay.ts';
import {
  ConversationList,
  ConversationListItem,
  ConversationWithMessages,
  EVENT_STREAM_DOC,
  EventStream,
  PageQuery,
  RenameBody,
  StreamMessageBody,
  type StreamMessageInput,
} from './schemas.ts';
import * as service from './service.ts';
import { startTurn } from './start-turn.ts';

/** DESIGN §4: new and existing conversations together. */
export const ADVISOR_MESSAGES: RateLimitRule = { name: 'advisor-messages', limit: 30, windowMs: 60_000 };
/** A stream request body up to this size is read while the rate-limit verdict is on its way. */
const READ_BEFORE_VERDICT_BYTES = 64 * 1024;

const STREAM_DESCRIPTION =
  'Checks, in order (each refusal stores, reserves and calls nothing): 503 SERVICE_UNAVAILABLE while draining; 429 RATE_LIMITED ' +
  '(30 per rolling 60 s per user, counted before the body is read); 413 PAYLOAD_TOO_LARGE; 400 VALIDATION_ERROR (schema, ' +
  'whitespace-only text, unknown personaId); per image 400 IMAGE_INVALID (base64) / 413 IMAGE_TOO_LARGE / 400 IMAGE_INVALID ' +
  '(bytes not of the declared format); 404 CONVERSATION_NOT_FOUND; clientMessageId: 409 CLIENT_MESSAGE_ID_REUSED, 409 ' +
  'STREAM_IN_PROGRESS while its reply streams, or a replay of the stored reply; 409 PROVIDER_KEY_NOT_CONFIGURED / ' +
  'PROVIDER_KEY_DECRYPTION_FAILED; 400 IMAGES_NOT_SUPPORTED; 409 STREAM_IN_PROGRESS (one live stream per user); billing ' +
  '402 / 429 TIER_LIMIT_IMAGES. Then 200 text/event-stream.';

export async function conversationsRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['advisor conversations'];

  // The rate-limit verdict of each stream request, asked for as soon as the request is authenticated.
  const admissions = new WeakMap<FastifyRequest, Promise<void>>();
  const admission = (req: FastifyRequest): Promise<void> => admissions.get(req) ?? Promise.resolve();
  // Route-level onRequest: after authentication, before the body is read. Every request counts
  // (DESIGN §4). A small body is read and checked while Redis answers, and the verdict is taken
  // with the turn's first reads (startTurn), so the limit costs no round trip of its own; a refusal
  // still outranks every later check, because any other error waits for the verdict first
  // (errorHandler below, and the catch in `stream`). A large body (images) is not read at all for
  // a request the limit refuses.
  const streamGate = async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (deps.lifecycle.draining) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly');
    const verdict = enforceRateLimit(deps.limiter, ADVISOR_MESSAGES, req.user.id, reply);
    verdict.catch(() => undefined);
    admissions.set(req, verdict);
    if (!(Number(req.headers['content-length']) <= READ_BEFORE_VERDICT_BYTES)) await verdict;
  };
  // Validation and body-size errors: a refused request is a 429 whatever else is wrong with it.
  const afterVerdict = async (err: unknown, req: FastifyRequest): Promise<never> => {
    await admission(req);
    throw err;
  };
  const stream = async (req: FastifyRequest, reply: FastifyReply, target: string | null): Promise<void> => {
    let turn: Awaited<ReturnType<typeof startTurn>>;
    try {
      turn = await startTurn(deps, req.user.id, target, req.body as StreamMessageInput, admission(req));
    } catch (err) {
      return afterVerdict(err, req);
    }
    // Up to 18 MB of base64 is decoded and stored by now; the stream may last minutes.
    (req as { body: unknown }).body = null;
    if (turn.kind === 'replay') return replayTurn(reply, turn);
    await relayTurn(deps, reply, turn);
  };
  // Keyed by media type so the errors stay documented as JSON.
  const streamResponses = responses({ 200: { description: EVENT_STREAM_DOC, content: { 'text/event-stream': { schema: EventStream } } } });

  app.post(
    '/advisor/conversations/new/messages/stream',
    {
      onRequest: streamGate,
      errorHandler: afterVerdict,
      schema: {
        tags,
        summary: 'Start a conversation and stream the reply (spec 4.3)',
        description: `Provider and model come from the active provider key. ${STREAM_DESCRIPTION}`,
        body: StreamMessageBody,
        response: streamResponses,
      },
    },
    async (req, reply) => stream(req, reply, null),
  );
  app.post(
    '/advisor/conversations/:id/messages/stream',
    {
      onRequest: streamGate,
      errorHandler: afterVerdict,
      schema: {
        tags,
        summary: 'Send a message in a conversation and stream the reply',
        description: `The conversation keeps its provider and model; earlier turns go along as context. ${STREAM_DESCRIPTION}`,
        params: IdParams,
        body: StreamMessageBody,
        response: streamResponses,
      },
    },
    async (req, reply) => stream(req, reply, req.params.id),
  );

  app.get(
    '/advisor/conversations',
    {
      schema: {
        tags,
        summary: "List the caller's conversations (spec 4.5)",
        description: 'Newest first by updatedAt; a malformed or foreign cursor, or a limit outside 1–100, is 400 VALIDATION_ERROR.',
        querystring: PageQuery,
        response: responses({ 200: ConversationList }),
      },
    },
    // The page comes serialized (service.listConversations); a string with a JSON type is sent as it is
    // (the typed reply knows only the object form of the schema).
    async (req, reply) => {
      const page = await service.listConversations(deps, req.user.id, req.query.cursor, req.query.limit);
      return (reply as FastifyReply).type('application/json; charset=utf-8').send(page);
    },
  );
  app.get(
    '/advisor/conversations/:id',
    {
      schema: {
        tags,
        summary: 'A conversation with one page of its messages',
        description: 'The first page holds the latest `limit` messages, oldest first; `nextCursor` fetches the page before it.',
        params: IdParams,
        querystring: PageQuery,
        response: responses({ 200: ConversationWithMessages }),
      },
    },
    async (req) => service.getConversation(deps, req.user.id, req.params.id, req.query.cursor, req.query.limit),
  );
  app.patch(
    '/advisor/conversations/:id',
    {
      schema: { tags, summary: 'Rename a conversation', params: IdParams, body: RenameBody, response: responses({ 200: ConversationListItem }) },
    },
    async (req) => service.renameConversation(deps, req.user.id, req.params.id, req.body.title),
  );
  app.delete(
    '/advisor/conversations/:id',
    { schema: { tags, summary: 'Delete a conversation with its messages and images', params: IdParams, response: responses({ 204: NoContent }) } },
    async (req, reply) => {
      await service.deleteConversation(deps, req.user.id, req.params.id);
      return reply.code(204).send(null);
    },
  );
  app.get(
    '/advisor/attachments/:id',
    {
      schema: {
        tags,
        summary: 'The bytes of an image sent with a message (owner only)',
        params: IdParams,
        response: responses({
          200: {
            description: 'The image bytes',
            content: Object.fromEntries(['image/png', 'image/jpeg', 'image/webp'].map((type) => [type, { schema: Type.Unsafe<Buffer>({ type: 'string', format: 'binary' }) }])),
          },
        }),
      },
    },
    async (req, reply) => {
      const { contentType, data } = await service.attachment(deps, req.user.id, req.params.id);
      // Immutable bytes behind a bearer token: cacheable by the client only.
      return reply.type(contentType).header('cache-control', 'private, max-age=31536000, immutable').header('x-content-type-options', 'nosniff').send(data);
    },
  );
}
