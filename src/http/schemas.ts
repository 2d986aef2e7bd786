import type { SwaggerTransformObject } from '@fastify/swagger';
import { Type, type Static, type TSchema, type TUnsafe } from 'typebox';
import { ERROR_STATUS, type ErrorCode } from './errors.ts';

/** A schema with a name (`$id`): registered once as a shared schema, documented once under `components.schemas`. */
export type NamedSchema = TSchema & { readonly $id: string };

/** Names a schema, for `ref` and for a feature's `components` list. */
export function named<T extends TSchema>($id: string, schema: T): T & { readonly $id: string } {
  return Object.assign(schema, { $id });
}

/**
 * A use of a named schema. fast-json-stringify resolves it against the shared schemas (app.ts
 * registers every feature's `components`), and the OpenAPI document shows the schema once instead
 * of a copy per route, so a generated client has one type per resource. The static type is the
 * named schema's own.
 */
export function ref<T extends NamedSchema>(schema: T): TUnsafe<Static<T>> {
  return Type.Unsafe<Static<T>>({ $ref: `${schema.$id}#` });
}

const ErrorEnvelopeSchema = named(
  'ErrorEnvelope',
  Type.Object(
    {
      error: Type.Object({
        code: Type.Enum(Object.keys(ERROR_STATUS) as ErrorCode[], {
          type: 'string',
          description: 'From one closed list, one status per code; switch on it, never on `message`',
        }),
        message: Type.String(),
        requestId: Type.String({ description: 'Also in the X-Request-Id header' }),
        details: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
      }),
    },
    { description: 'Every non-2xx response' },
  ),
);
/** The error envelope as a response schema, for a route that names a refusal's status itself. */
export const ErrorEnvelope = ref(ErrorEnvelopeSchema);

/** The shared schemas of the HTTP layer, registered with the features' own (app.ts). */
export const components: NamedSchema[] = [ErrorEnvelopeSchema];

export const Uuid = Type.String({ format: 'uuid' });
export const IsoDateTime = Type.String({ format: 'date-time' });
export const IdParams = Type.Object({ id: Uuid });

/** Response map for a route: its success schema(s) plus the shared error envelope. */
export function responses<T extends Record<number, TSchema>>(ok: T) {
  return { ...ok, '4xx': ErrorEnvelope, '5xx': ErrorEnvelope };
}

export const NoContent = Type.Null({ description: 'No content' });

const ENVELOPE_REF = '#/components/schemas/ErrorEnvelope';
const ERROR_RESPONSE = {
  description: 'The error envelope; every non-2xx answer, whatever its status',
  headers: {
    'X-Request-Id': { description: 'Also `error.requestId`; on every response', schema: { type: 'string' as const } },
    'Retry-After': { description: 'On 429 and on 503 when a retry may succeed: whole seconds to wait', schema: { type: 'integer' as const } },
  },
  content: { 'application/json': { schema: { $ref: ENVELOPE_REF } } },
};

type Responses = Record<string, { $ref?: string; content?: Record<string, { schema?: { $ref?: string } }> }>;
type Parameter = { in?: string; name?: string; description?: string; required?: boolean; schema?: unknown };

/**
 * The SSE reconnection header: a route that reads `?lastEventId=` (for clients that cannot set
 * headers) reads the `Last-Event-ID` header first. The route takes the header as sent (any value; a
 * malformed one is its 400), so it is documented here rather than validated by a headers schema.
 */
const LAST_EVENT_ID: Parameter = {
  in: 'header',
  name: 'Last-Event-ID',
  required: false,
  description: 'The id of the last frame the client has (an EventSource sends it on reconnecting); wins over `?lastEventId=`',
  schema: { type: 'string', pattern: '^[0-9]{1,15}$' },
};

/**
 * @fastify/swagger writes a response object per status per route; those whose body is the error
 * envelope (the 4XX and 5XX of `responses`) become one shared `components.responses.Error`. An
 * operation with a `lastEventId` query parameter also gets its `Last-Event-ID` header.
 */
export const shareErrorResponses: SwaggerTransformObject = (document) => {
  if (!('openapiObject' in document)) return document.swaggerObject;
  const doc = document.openapiObject;
  for (const item of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(item ?? {}) as { responses?: Responses; parameters?: Parameter[] }[]) {
      const answers = operation.responses ?? {};
      for (const [status, answer] of Object.entries(answers)) {
        if (answer.content?.['application/json']?.schema?.$ref === ENVELOPE_REF) answers[status] = { $ref: '#/components/responses/Error' };
      }
      const parameters = operation.parameters ?? [];
      const resumes = parameters.some((p) => p.in === 'query' && p.name === 'lastEventId');
      if (resumes && !parameters.some((p) => p.in === 'header' && p.name?.toLowerCase() === 'last-event-id')) {
        operation.parameters = [LAST_EVENT_ID, ...parameters];
      }
    }
  }
  doc.components = { ...doc.components, responses: { ...doc.components?.responses, Error: ERROR_RESPONSE } };
  return doc;
};
