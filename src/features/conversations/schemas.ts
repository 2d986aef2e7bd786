import { Type, type Static } from 'typebox';
import { ProviderSchema } from '../../catalogue.ts';
import { IsoDateTime, named, ref, Uuid, type NamedSchema } from '../../http/schemas.ts';

export const MAX_ATTACHMENTS = 4;
const MAX_BASE64_CHARS = 4_500_000;
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
    replaces: Type.Optional(
      Type.String({
        format: 'uuid',
        description:
          "Regenerate or edit the last turn: the id of the conversation's last user message. This turn takes its place — that message, its " +
          'images and its reply are removed in the statement that stores this turn (a refused turn changes nothing), and are not sent ' +
          'to the model. Its images are not carried over: send them again. Only on an existing conversation.',
      }),
    ),
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

export const ListQuery = Type.Object(
  {
    ...PageQuery.properties,
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          'Search: only the conversations whose title or messages hold every word of `q` (whole words — "earnings", not "earn" —, ' +
          'any case, any script; at most 8 words); same order and cursors. A `q` without a letter or digit finds nothing.',
      }),
    ),
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

const ToolArguments = Type.Object({}, { additionalProperties: true, description: 'The arguments the model gave (`{}` when they were not a JSON object)' });
const ToolOutcomeOk = { ok: Type.Literal(true), result: Type.Object({}, { additionalProperties: true }) };
const ToolOutcomeError = {
  ok: Type.Literal(false),
  error: Type.Object({
    code: Type.String({
      description:
        'TOOL_INVALID_ARGUMENTS, UNKNOWN_SYMBOL, MARKET_DATA_KEY_INVALID, MARKET_DATA_RATE_LIMITED, MARKET_DATA_UNAVAILABLE, ' +
        'MARKET_DATA_NOT_ENTITLED, ACCOUNT_NOT_FOUND, ACCOUNT_AMBIGUOUS (the message lists the candidates), UNKNOWN_TOOL, ' +
        'TOOL_CALL_LIMIT_REACHED or TOOL_FAILED',
    }),
    message: Type.String(),
  }),
};

const MessagePartSchema = named(
  'MessagePart',
  Type.Union(
    [
      Type.Object({ type: Type.Literal('text'), text: Type.String() }),
      Type.Object({ type: Type.Literal('tool_call'), id: Type.String(), name: Type.String(), arguments: ToolArguments }),
      Type.Object({ type: Type.Literal('tool_result'), id: Type.String(), name: Type.String(), ...ToolOutcomeOk }),
      Type.Object({ type: Type.Literal('tool_result'), id: Type.String(), name: Type.String(), ...ToolOutcomeError }),
    ],
    { description: 'A piece of a message, in order: its text, and for a reply the tool calls it made and their results' },
  ),
);

const NullableCount = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'null when the provider did not report it' });

/** DESIGN §13: a turn's figures as its provider reported them, summed over its rounds. */
const UsageSchema = named(
  'Usage',
  Type.Object(
    {
      inputTokens: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
        description: 'Every input token, cached ones included; null when the provider reported none',
      }),
      outputTokens: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
        description: 'Every output token, reasoning included; null when the provider reported none',
      }),
      cachedInputTokens: NullableCount,
      reasoningTokens: NullableCount,
      estimatedCostUsd: Type.Union([Type.Number({ minimum: 0 }), Type.Null()], {
        description:
          'What the turn cost on the user’s own provider key (the provider’s reported cost, else the catalogue’s prices), not what the service ' +
          'charged; null when unknown',
      }),
    },
    { description: 'Figures are what was counted: an interrupted or failed turn has those of the rounds that reported' },
  ),
);
const Usage = ref(UsageSchema);

const FigureSpan = {
  text: Type.String({ description: 'The figure as written: `content.slice(start, end)`' }),
  start: Type.Integer({ minimum: 0, description: 'Offset in the reply’s text, in UTF-16 code units' }),
  end: Type.Integer({ minimum: 0, description: 'Exclusive' }),
};

/** DESIGN §18: the check of a reply's figures against the data its turn saw. */
const GroundingSchema = named(
  'Grounding',
  Type.Object(
    {
      figures: Type.Integer({ minimum: 0, description: 'Figures found in the reply’s text (amounts, percentages, prices, quantities, R-multiples)' }),
      matched: Type.Integer({ minimum: 0, description: 'Of them, equal to a source value rounded to the figure’s own decimals' }),
      unmatched: Type.Array(Type.Object(FigureSpan), { description: 'Figures no source holds, sorted by start' }),
      sources: Type.Array(
        Type.Object({
          ...FigureSpan,
          toolCallId: Type.Union([Type.String(), Type.Null()], {
            description: 'The tool call whose result held the value (the id of its tool_call / tool_result); null: the user’s own message',
          }),
        }),
        { description: 'One per matched figure, sorted by start' },
      ),
    },
    {
      description:
        'DESIGN §18: the figures of the reply’s text matched to the values of this turn’s tool results and the user’s message (absolute values; ' +
        'a percentage also as a ratio × 100; k/M/B scaled). figures = matched + unmatched.length; matched = sources.length. On `done`, a reply ' +
        '(`grounding`) and an ended reply’s `snapshot`; absent on a user message, a snapshot of a reply still streaming, a reply stored before the ' +
        'check and one the crash sweeper closed. A failed turn’s `error` frame has none: its stored reply does',
    },
  ),
);
const Grounding = ref(GroundingSchema);

const MessageSchema = named(
  'Message',
  Type.Object({
    id: Uuid,
    role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
    text: Type.String({ description: 'For a reply: exactly the text streamed to the client' }),
    parts: Type.Array(ref(MessagePartSchema), { description: 'The text and, for a reply, its tool calls and results, in order' }),
    status: Type.Union([Type.Literal('complete'), Type.Literal('streaming'), Type.Literal('interrupted'), Type.Literal('failed')]),
    clientMessageId: Type.Union([Uuid, Type.Null()]),
    finishReason: Type.Union([Type.String(), Type.Null()]),
    usage: Type.Union([Usage, Type.Null()], { description: 'A reply’s usage (DESIGN §13); null for a user message' }),
    error: Type.Union([Type.Object({ code: Type.String(), retryable: Type.Boolean() }), Type.Null()]),
    attachments: Type.Array(ref(AttachmentSchema)),
    grounding: Type.Optional(Grounding),
    billing: Type.Union(
      [
        Type.Object({
          source: Type.Union([Type.Literal('allowance'), Type.Literal('credits'), Type.Literal('free')]),
          credits: Type.Integer({ description: 'Credits the turn took (reserved while it streams; 0 once returned)' }),
          status: Type.Union([Type.Literal('reserved'), Type.Literal('charged'), Type.Literal('returned')], {
            description: '`reserved` while the reply streams; `charged`, or `returned` when it produced nothing (DESIGN §7)',
          }),
        }),
        Type.Null(),
      ],
      { description: 'How a reply’s turn was paid (DESIGN §8); null for a user message' },
    ),
    createdAt: IsoDateTime,
    completedAt: Type.Union([IsoDateTime, Type.Null()]),
  }),
);
const Message = ref(MessageSchema);
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

/* The `data:` of each stream frame (DESIGN §7, §11, §13), one named schema per `event:`. */

const StreamStartFrameSchema = named(
  'StreamStartFrame',
  Type.Object(
    {
      conversationId: Uuid,
      userMessageId: Uuid,
      assistantMessageId: Uuid,
      provider: ProviderSchema,
      model: Type.String(),
      billing: Type.Object({
        source: Type.Union([Type.Literal('allowance'), Type.Literal('credits'), Type.Literal('free')]),
        credits: Type.Integer({ description: 'Credits reserved for this turn; returned if it produces no text' }),
      }),
    },
    { description: '`event: start`, the first frame' },
  ),
);

const StreamDeltaFrameSchema = named(
  'StreamDeltaFrame',
  Type.Object({ text: Type.String({ description: 'The next piece of the reply; the reply is their concatenation' }) }, { description: '`event: delta`' }),
);

const StreamToolCallFrameSchema = named(
  'StreamToolCallFrame',
  Type.Object(
    {
      id: Type.String(),
      name: Type.String({
        description:
          'get_quote, get_price_history, get_market_status, search_symbols, list_my_accounts, get_journal, list_trades, position_size, ' +
          'get_round_trips or get_journal_report',
      }),
      arguments: ToolArguments,
    },
    { description: '`event: tool_call`: a tool call of the model, once its arguments are complete' },
  ),
);

const StreamToolResultFrameSchema = named(
  'StreamToolResultFrame',
  Type.Union(
    [Type.Object({ id: Type.String(), name: Type.String(), ...ToolOutcomeOk }), Type.Object({ id: Type.String(), name: Type.String(), ...ToolOutcomeError })],
    { description: '`event: tool_result`: the outcome of the tool call with the same id' },
  ),
);

const StreamDoneFrameSchema = named(
  'StreamDoneFrame',
  Type.Object(
    {
      finishReason: Type.Union([
        Type.Literal('stop'),
        Type.Literal('length'),
        Type.Literal('content_filter'),
        Type.Literal('stopped'),
        Type.Literal('aborted'),
      ]),
      usage: Usage,
      toolCalls: Type.Optional(Type.Integer({ description: 'Tool calls made during the turn' })),
      grounding: Type.Optional(Grounding),
    },
    { description: '`event: done`: the turn ended; the last frame' },
  ),
);

const StreamErrorFrameSchema = named(
  'StreamErrorFrame',
  Type.Object(
    {
      code: Type.String({
        description:
          'PROVIDER_AUTH_FAILED, PROVIDER_RATE_LIMITED, PROVIDER_UNAVAILABLE, PROVIDER_ERROR, UPSTREAM_TIMEOUT (also a turn past ' +
          'STREAM_MAX_DURATION_MS), SHUTTING_DOWN, STREAM_IN_PROGRESS (another stream of the user took over) or INTERNAL',
      }),
      message: Type.String(),
      retryable: Type.Boolean(),
    },
    { description: '`event: error`: the turn failed; the last frame' },
  ),
);

const StreamSnapshotFrameSchema = named(
  'StreamSnapshotFrame',
  Type.Object(
    {
      assistantMessageId: Type.String({ format: 'uuid' }),
      status: Type.Union([Type.Literal('streaming'), Type.Literal('complete'), Type.Literal('interrupted'), Type.Literal('failed')]),
      text: Type.String({ description: 'All the reply’s text so far' }),
      parts: Type.Array(ref(MessagePartSchema), { description: 'The reply’s text, tool calls and results so far, in order' }),
      usage: Type.Optional(Usage),
      grounding: Type.Optional(Grounding),
    },
    {
      description:
        '`event: snapshot` (DESIGN §12, on attaching only): the reply so far, in place of the frames up to this id that the log no longer holds; ' +
        'replaces what the client had. Live frames (or the terminal one) follow.',
    },
  ),
);

const FRAMES = {
  start: StreamStartFrameSchema,
  snapshot: StreamSnapshotFrameSchema,
  delta: StreamDeltaFrameSchema,
  tool_call: StreamToolCallFrameSchema,
  tool_result: StreamToolResultFrameSchema,
  done: StreamDoneFrameSchema,
  error: StreamErrorFrameSchema,
};

/** DESIGN §12: where an attaching client resumes, for clients that cannot set the Last-Event-ID header. */
export const AttachQuery = Type.Object(
  {
    lastEventId: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,15}$', description: 'The id of the last frame the client has; the `Last-Event-ID` header wins' }),
    ),
  },
  { additionalProperties: false },
);

export const StopResult = Type.Object(
  {
    status: Type.Union([Type.Literal('streaming'), Type.Literal('complete'), Type.Literal('interrupted'), Type.Literal('failed'), Type.Null()], {
      description: '202: `streaming` (the turn was told to stop); 200: the status of the latest turn, which is not live',
    }),
  },
  { description: 'What a stop found' },
);

export const EVENT_STREAM_DOC =
  'text/event-stream. Frames, each with an increasing `id:`, an `event:` and a JSON `data:` (the schema named in `x-sse-events`): ' +
  '`start`, then `delta`s, with `tool_call` / `tool_result` pairs between them when the advisor uses a tool, then exactly one of ' +
  '`done` or `error`. A `: ping` comment keeps the connection alive.';
/** OpenAPI 3.1 has no schema for the items of a stream: each event's `data:` is named in `x-sse-events`. */
export const EventStream = Type.String({
  description: EVENT_STREAM_DOC,
  'x-sse-events': Object.fromEntries(Object.entries(FRAMES).map(([event, schema]) => [event, ref(schema)])),
});

/** Registered as shared schemas (app.ts): `components.schemas` of the OpenAPI document. */
export const components: NamedSchema[] = [
  UsageSchema,
  ConversationListItemSchema,
  ConversationListSchema,
  AttachmentSchema,
  MessagePartSchema,
  GroundingSchema,
  MessageSchema,
  ConversationWithMessagesSchema,
  ...Object.values(FRAMES),
];
