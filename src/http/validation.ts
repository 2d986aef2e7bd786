import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';

/**
 * Bodies are validated exactly as sent (a number is not a string); params and query strings arrive
 * as text, so they are coerced to the schema's types.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<FastifySchema> {
  const common: Options = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false };
  const exact = addFormats.default(new Ajv({ ...common, coerceTypes: false }));
  const coercing = addFormats.default(new Ajv({ ...common, coerceTypes: 'array' }));
  return ({ schema, httpPart }) => (httpPart === 'body' ? exact : coercing).compile(schema as object);
}
