import { Type, type TSchema } from 'typebox';
import { ERROR_STATUS } from './errors.ts';

export const ErrorEnvelopeSchema = Type.Object(
  {
    error: Type.Object({
      code: Type.Union(Object.keys(ERROR_STATUS).map((c) => Type.Literal(c))),
      message: Type.String(),
      requestId: Type.String(),
      details: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
    }),
  },
  { description: 'Every non-2xx response' },
);

export const Uuid = Type.String({ format: 'uuid' });
export const IsoDateTime = Type.String({ format: 'date-time' });
export const IdParams = Type.Object({ id: Uuid });

/** Response map for a route: its success schema(s) plus the shared error envelope. */
export function responses<T extends Record<number, TSchema>>(ok: T) {
  return { ...ok, '4xx': ErrorEnvelopeSchema, '5xx': ErrorEnvelopeSchema };
}

export const NoContent = Type.Null({ description: 'No content' });
