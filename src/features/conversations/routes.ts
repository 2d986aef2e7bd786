import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { IdParams, NoContent, responses } from '../../http/schemas.ts';
import {
  AttachQuery,
  ConversationList,
  ConversationListItem,
  ConversationWithMessages,
  EVENT_STREAM_DOC,
  EventStream,
  ListQuery,
  PageQuery,
  RenameBody,
  StopResult,
  StreamMessageBody,
} from './schemas.ts';
import { attachToConversation, lastEventId, stopConversationTurn } from './attach.ts';
import * as service from './service.ts';
import { admitTurn, decorateAdmission, holdingSlot, holdStreamSlot, refuseAfterVerdict } from './admission.ts';
import { streamTurn, TURN_CHECKS_DOC } from './turn.ts';

export async function conversationsRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['advisor conversations'];

  decorateAdmission(parent);
  const admission = admitTurn(deps);
  // Keyed by media type so the errors stay documented as JSON.
  const streamResponses = responses({ 200: { description: EVENT_STREAM_DOC, content: { 'text/event-stream': { schema: EventStream } } } });

  app.post(
    '/advisor/conversations/new/messages/stream',
    {
      onRequest: admission,
      errorHandler: refuseAfterVerdict,
      schema: {
        tags,
        operationId: 'streamNewConversationMessage',
        summary: 'Start a conversation and stream the reply (spec 4.3)',
        description: `Provider and model come from the active provider key. ${TURN_CHECKS_DOC}`,
        body: StreamMessageBody,
        response: streamResponses,
      },
    },
    async (req, reply) => holdingSlot(reply, streamTurn(deps, req, reply, null)),
  );
  app.post(
    '/advisor/conversations/:id/messages/stream',
    {
      onRequest: admission,
      errorHandler: refuseAfterVerdict,
      schema: {
        tags,
        operationId: 'streamConversationMessage',
        summary: 'Send a message in a conversation and stream the reply',
        description: `The conversation keeps its provider and model; earlier turns go along as context. ${TURN_CHECKS_DOC}`,
        params: IdParams,
        body: StreamMessageBody,
        response: streamResponses,
      },
    },
    async (req, reply) => holdingSlot(reply, streamTurn(deps, req, reply, req.params.id)),
  );

  app.get(
    '/advisor/conversations/:id/stream',
    {
      onRequest: async (_req, reply) => holdStreamSlot(deps, reply),
      schema: {
        tags,
        operationId: 'attachConversationStream',
        summary: 'Attach to the latest turn’s stream from any instance (resume)',
        description:
          'DESIGN §12. Sends the frames after `Last-Event-ID` (header, or `?lastEventId=`; from the first frame without one), then follows the turn ' +
          'live until its terminal frame. ' +
          'When the log no longer holds that id (trimmed past STREAM_LOG_MAX_BYTES, or expired STREAM_LOG_RETENTION_MS after the end), one `snapshot` ' +
          'frame carries the reply so far. ' +
          '204 when no turn ever ran, or when the client already has the terminal frame (an EventSource stops reconnecting). ' +
          '503 SERVICE_UNAVAILABLE (with Retry-After) with MAX_OPEN_STREAMS streams open on the instance (DESIGN §16), and when the log of a running ' +
          'turn cannot be read; an ended turn is then answered from the database ' +
          '(`snapshot` + terminal frame). ' +
          'Never counts toward the message limit; never calls a provider.',
        params: IdParams,
        querystring: AttachQuery,
        response: responses({ 200: { description: EVENT_STREAM_DOC, content: { 'text/event-stream': { schema: EventStream } } }, 204: NoContent }),
      },
    },
    async (req, reply) => {
      const after = lastEventId(req.headers['last-event-id'], req.query.lastEventId);
      await attachToConversation(deps, req.user.id, req.params.id, after, reply);
    },
  );
  app.post(
    '/advisor/conversations/:id/stop',
    {
      schema: {
        tags,
        operationId: 'stopConversationTurn',
        summary: 'Stop the reply being streamed, from any instance',
        description:
          'DESIGN §12. 202 when a live turn was told to stop: its instance aborts the provider (and tool) calls within a second, stores the reply ' +
          '`interrupted` with what was produced (charged if a delta was), and ends every attached stream with `done` `finishReason: "stopped"`. 200 ' +
          'with the latest turn’s status when none is live.',
        params: IdParams,
        response: responses({ 200: StopResult, 202: StopResult }),
      },
    },
    async (req, reply) => {
      const { code, status } = await stopConversationTurn(deps, req.user.id, req.params.id);
      return reply.code(code).send({ status });
    },
  );
  app.get(
    '/advisor/conversations',
    {
      schema: {
        tags,
        operationId: 'listConversations',
        summary: "List the caller's conversations (spec 4.5)",
        description:
          'Newest first by updatedAt; a malformed or foreign cursor, or a limit outside 1–100, is 400 VALIDATION_ERROR. ' +
          'With `q`, only the conversations whose title or messages hold its words (a finished turn is found from its end on).',
        querystring: ListQuery,
        response: responses({ 200: ConversationList }),
      },
    },
    // The page comes serialized (service.listConversations); a string with a JSON type is sent as it is
    // (the typed reply knows only the object form of the schema).
    async (req, reply) => {
      const page = await service.listConversations(deps, req.user.id, req.query.cursor, req.query.limit, req.query.q);
      return (reply as FastifyReply).type('application/json; charset=utf-8').send(page);
    },
  );
  app.get(
    '/advisor/conversations/:id',
    {
      schema: {
        tags,
        operationId: 'getConversation',
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
      schema: {
        tags,
        operationId: 'renameConversation',
        summary: 'Rename a conversation',
        params: IdParams,
        body: RenameBody,
        response: responses({ 200: ConversationListItem }),
      },
    },
    async (req) => service.renameConversation(deps, req.user.id, req.params.id, req.body.title),
  );
  app.delete(
    '/advisor/conversations/:id',
    {
      schema: {
        tags,
        operationId: 'deleteConversation',
        summary: 'Delete a conversation with its messages and images',
        params: IdParams,
        response: responses({ 204: NoContent }),
      },
    },
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
        operationId: 'getAttachment',
        summary: 'The bytes of an image sent with a message (owner only)',
        params: IdParams,
        response: responses({
          200: {
            description: 'The image bytes',
            content: Object.fromEntries(
              ['image/png', 'image/jpeg', 'image/webp'].map((type) => [type, { schema: Type.Unsafe<Buffer>({ type: 'string', format: 'binary' }) }]),
            ),
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
