import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import { unstorableTextAt } from '../db/storable-text.ts';
import { isBoundedDay, isBoundedInstant } from './dates.ts';

/**
 * Bodies are validated exactly as sent (a number is not a string); params and query strings arrive
 * as text, so they are coerced to the schema's types — from decimal digits only (Ajv alone would
 * read `0x10`, `1e1` or ` 16` as numbers). Every part, once valid, must also hold only text
 * PostgreSQL can store (DESIGN §10): one rule here instead of one per route. Days (`format: date`)
 * and instants (`format: date-time`) are also bounded to the years 1970–9999 (dates.ts).
 */
export function createValidatorCompiler(): FastifySchemaCompiler<FastifySchema> {
  const common: Options = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false };
  const exact = withBoundedDates(addFormats.default(new Ajv({ ...common, coerceTypes: false })));
  const coercing = withBoundedDates(addFormats.default(new Ajv({ ...common, coerceTypes: 'array' })));
  return ({ schema, httpPart }) => {
    const coerced = httpPart !== 'body';
    return withEdgeRules((coerced ? coercing : exact).compile(schema as object), coerced ? numericProperties(schema) : []);
  };
}

function withBoundedDates(ajv: Ajv): Ajv {
  return ajv.addFormat('date', isBoundedDay).addFormat('date-time', isBoundedInstant);
}

type EdgeValidate = ((data: unknown, ctx?: unknown) => boolean) & { errors?: ErrorObject[] | null; schemaEnv?: unknown };

function withEdgeRules(validate: ValidateFunction, numeric: readonly NumericProperty[]): EdgeValidate {
  const edge: EdgeValidate = (data, ctx) => {
    const refused = nonDecimal(data, numeric);
    if (refused) {
      edge.errors = [refused];
      return false;
    }
    const valid = ctx === undefined ? validate(data) : validate(data, ctx as Parameters<ValidateFunction>[1]);
    edge.errors = validate.errors ?? null;
    if (!valid) return false;
    const where = unstorableTextAt(data);
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

interface NumericProperty {
  readonly key: string;
  readonly integer: boolean;
}

const INTEGER_TEXT = /^-?[0-9]{1,16}$/;
const NUMBER_TEXT = /^-?[0-9]{1,16}(\.[0-9]{1,16})?$/;

/** The top-level properties of a params or query schema that are coerced from text to numbers. */
function numericProperties(schema: unknown): NumericProperty[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties;
  if (!properties) return [];
  const found: NumericProperty[] = [];
  for (const [key, property] of Object.entries(properties)) {
    const types = Array.isArray(property.type) ? (property.type as unknown[]) : [property.type];
    if (types.includes('integer')) found.push({ key, integer: true });
    else if (types.includes('number')) found.push({ key, integer: false });
  }
  return found;
}

function nonDecimal(data: unknown, numeric: readonly NumericProperty[]): ErrorObject | undefined {
  if (numeric.length === 0 || typeof data !== 'object' || data === null) return undefined;
  for (const { key, integer } of numeric) {
    const raw = (data as Record<string, unknown>)[key];
    for (const value of Array.isArray(raw) ? raw : [raw]) {
      if (typeof value === 'string' && !(integer ? INTEGER_TEXT : NUMBER_TEXT).test(value)) {
        return edgeError(`/${key}`, 'type', `must be ${integer ? 'an integer' : 'a number'} in decimal digits`);
      }
    }
  }
  return undefined;
}
