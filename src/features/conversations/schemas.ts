import { Type, type Static } from 'typebox';
import { ProviderSchema } from '../../catalogue.ts';
import { IsoDateTime, named, ref, Uuid, type NamedSchema } from '../../http/schemas.ts';

export const MAX_ATTACHMENTS = 4;
export const MAX_BASE64_CHARS = 4_500_000;
export const MAX_TEXT_CHARS = 50_000;

const ImageFormat = Type.Union([Type.Literal('png'), Type.Literal('jpeg'), Type.Literal('webp')]);

const AttachmentInput = Type.Object(
  {
    type: Type.Literal('image'),
    format: ImageFormat,
    dataBase64: Type.String({
      maxLength: MAX_BASE64_CHARS,
      description: 'Standard base64 (padding optional) of the image bytes; they must be of the declared format',
    }),
  },
  { additionalProperties: false },
);

/** Spec 2.3; the same body for a new and an existing conversation. */
export const StreamMessageBody = Type.Object(
  {
    text: Type.String({ minLength: 1, maxLength: MAX_TEXT_CHARS, description: 'Not only whitespace' }),
    clientMessageId: Type.String({ format: 'uuid', description: 'Idempotency key per user: a retry with the same id and text replays the stored reply' }),
    personaId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'A catalogue persona; on an existing conversation it switches the persona from this turn on' }),
    ),
    attachments: Type.Optional(Type.Array(AttachmentInput, { maxItems: MAX_ATTACHMENTS })),
  },
  { additionalProperties: false },
);
export type StreamMessageInput = Static<typeof StreamMessageBody>;

export const PageQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'A nextCursor from a previous page' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 25 })),
  },
  { additionalProperties: false },
);

const listItemFields = {
  id: Uuid,
  title: Type.String(),
  provider: ProviderSchema,
  model: Type.String(),
  personaId: Type.Union([Type.String(), Type.Null()]),
  messageCount: Type.Integer({ description: 'User and assistant messages, the reply in progress included' }),
  lastMessageAt: IsoDateTime,
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
};

const ConversationListItemSchema = named('ConversationListItem', Type.Object(listItemFields));
export const ConversationListItem = ref(ConversationListItemSchema);
export type ConversationListItemDto = Static<typeof ConversationListItemSchema>;

const ConversationListSchema = named(
  'ConversationList',
  Type.Object({
    items: Type.Array(ConversationListItem, { description: 'Sorted by updatedAt, newest first' }),
    nextCursor: Type.Union([Type.String(), Type.Null()]),
  }),
);
export const ConversationList = ref(ConversationListSchema);

const AttachmentSchema = named(
  'Attachment',
  Type.Object({
    id: Uuid,
    format: ImageFormat,
    byteSize: Type.Integer(),
    url: Type.String({ description: 'GET it with the same bearer token' }),
  }),
);

const MessageSchema = named(
  'Message',
  Type.Object({
    id: Uuid,
    role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
    text: Type.String({ description: 'For a reply: exactly the text streamed to the client' }),
    status: Type.Union([Type.Literal('complete'), Type.Literal('streaming'), Type.Literal('interrupted'), Type.Literal('failed')]),
    clientMessageId: Type.Union([Uuid, Type.Null()]),
    finishReason: Type.Union([Type.String(), Type.Null()]),
    usage: Type.Union([Type.Object({ inputTokens: Type.Integer(), outputTokens: Type.Integer() }), Type.Null()]),
    error: Type.Union([Type.Object({ code: Type.String(), retryable: Type.Boolean() }), Type.Null()]),
    attachments: Type.Array(ref(AttachmentSchema)),
    createdAt: IsoDateTime,
    completedAt: Type.Union([IsoDateTime, Type.Null()]),
  }),
);
export const Message = ref(MessageSchema);
export type MessageDto = Static<typeof MessageSchema>;

const ConversationWithMessagesSchema = named(
  'ConversationWithMessages',
  Type.Object({
    ...listItemFields,
    messages: Type.Array(Message, { description: 'One page, oldest first (newest last); the first page holds the latest messages' }),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Cursor of the page of older messages; null at the beginning' }),
  }),
);
export const ConversationWithMessages = ref(ConversationWithMessagesSchema);
export type ConversationWithMessagesDto = Static<typeof ConversationWithMessagesSchema>;

/** The service collapses whitespace and takes 1 to 200 characters (service.ts); a longer string is refused up front. */
const TITLE_MAX = 200;
export const RenameBody = Type.Object(
  { title: Type.String({ minLength: 1, maxLength: TITLE_MAX, description: `Whitespace collapsed; 1 to ${TITLE_MAX} characters` }) },
  { additionalProperties: false },
);

export const EVENT_STREAM_DOC =
  'text/event-stream. Frames, each with an increasing `id:`: `start` {conversationId, userMessageId, assistantMessageId, provider, model, ' +
  'billing: {source, credits}}, `delta` {text}, then exactly one of `done` {finishReason, usage: {inputTokens, outputTokens}} or ' +
  '`error` {code, message, retryable}. A `: ping` comment keeps the connection alive.';
export const EventStream = Type.String({ description: EVENT_STREAM_DOC });

/** Registered as shared schemas (app.ts): `components.schemas` of the OpenAPI document. */
export const components: NamedSchema[] = [
  ConversationListItemSchema,
  ConversationListSchema,
  AttachmentSchema,
  MessageSchema,
  ConversationWithMessagesSchema,
];
