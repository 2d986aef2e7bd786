// Start-up: each distinct response schema is compiled once per set of shared schemas, and the serializer
// it gives answers exactly as one compiled for the route alone would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import { sharedSerializers } from './serializers.ts';

const SHARED = {
  Envelope: {
    $id: 'Envelope',
    type: 'object',
    properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } } },
  },
};

/** Fastify's own factory, counting the compiles it is asked for. */
function counting(): { factory: SerializerFactory; compiles: () => number } {
  let n = 0;
  const build = SerializerSelector();
  return {
    factory: (schemas, options) => {
      const compile = build(schemas, options);
      return (route) => {
        n++;
        return compile(route);
      };
    },
    compiles: () => n,
  };
}

test('start-up: the same response schema on many routes and statuses is compiled once; its serializer answers as a route-own one', () => {
  const { factory, compiles } = counting();
  const compiler = sharedSerializers(factory)(SHARED, {});
  const routes = ['/a', '/b', '/c'].flatMap((url) =>
    ['4xx', '5xx'].map((httpStatus) => compiler({ method: 'GET', url, httpStatus, schema: { $ref: 'Envelope#' } })),
  );
  assert.equal(compiles(), 1);
  assert.ok(routes.every((s) => s === routes[0]));
  const own = SerializerSelector()(SHARED, {})({ method: 'GET', url: '/a', httpStatus: '4xx', schema: { $ref: 'Envelope#' } });
  const body = { error: { code: 'NOT_FOUND', message: 'no such thing', secret: 'dropped by the schema' }, extra: 1 };
  assert.equal(routes[0]?.(body), own(body));
  assert.equal(routes[0]?.(body), '{"error":{"code":"NOT_FOUND","message":"no such thing"}}');
});

test('start-up: a response schema of another text gets its own serializer; another set of shared schemas compiles its own', () => {
  const { factory, compiles } = counting();
  const shared = sharedSerializers(factory);
  const compiler = shared(SHARED, {});
  const count = compiler({ method: 'GET', url: '/n', httpStatus: '200', schema: { type: 'object', properties: { n: { type: 'integer' } } } });
  const name = compiler({ method: 'GET', url: '/s', httpStatus: '200', schema: { type: 'object', properties: { s: { type: 'string' } } } });
  assert.equal(compiles(), 2);
  assert.equal(count({ n: 3, s: 'x' }), '{"n":3}');
  assert.equal(name({ n: 3, s: 'x' }), '{"s":"x"}');
  // An encapsulated scope that adds schemas builds its own compiler: nothing compiled before is reused there.
  const other = shared({ Envelope: { $id: 'Envelope', type: 'object', properties: { code: { type: 'string' } } } }, {});
  const envelope = other({ method: 'GET', url: '/a', httpStatus: '4xx', schema: { $ref: 'Envelope#' } });
  assert.equal(compiles(), 3);
  assert.equal(envelope({ code: 'X', error: {} }), '{"code":"X"}');
});
