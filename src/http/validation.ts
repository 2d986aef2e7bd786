import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';

/**
 * Bodies are validated exactly as sent (a number is not a string); params and query strings arrive
 * as text, so they are coerced to the schema's types. Every part, once valid, must also hold only
 * text PostgreSQL can store (DESIGN §10): one rule here instead of one per route.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<FastifySchema> {
  const common: Options = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false };
  const exact = addFormats.default(new Ajv({ ...common, coerceTypes: false }));
  const coercing = addFormats.default(new Ajv({ ...common, coerceTypes: 'array' }));
  return ({ schema, httpPart }) => withEdgeRules((httpPart === 'body' ? exact : coercing).compile(schema as object));
}

type EdgeValidate = ((data: unknown, ctx?: unknown) => boolean) & { errors?: ErrorObject[] | null; schemaEnv?: unknown };

function withEdgeRules(validate: ValidateFunction): EdgeValidate {
  const edge: EdgeValidate = (data, ctx) => {
    const valid = ctx === undefined ? validate(data) : validate(data, ctx as Parameters<ValidateFunction>[1]);
    edge.errors = validate.errors ?? null;
    if (!valid) return false;
    const where = unstorableText(data, '');
    if (where === undefined) return true;
    edge.errors = [edgeError(where, 'unstorableText', 'must not contain \\u0000 or an unpaired surrogate')];
    return false;
  };
  // Fastify hands Ajv the request as parent data (so a coerced root can be replaced) when it sees this.
  edge.schemaEnv = validate.schemaEnv;
  return edge;
}

function edgeError(instancePath: string, keyword: string, message: string): ErrorObject {
  return { instancePath, keyword, message, params: {}, schemaPath: '#' };
}

/**
 * The first string (or property name) PostgreSQL cannot store as sent: `\u0000` is refused by text
 * columns, and an unpaired surrogate would be stored as U+FFFD, not as what was sent.
 */
function unstorableText(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') || !value.isWellFormed() ? path || '/' : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableText(value[i], `${path}/${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const here = `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (key.includes('\u0000') || !key.isWellFormed()) return here;
    const found = unstorableText(item, here);
    if (found !== undefined) return found;
  }
  return undefined;
}
