import { SerializerSelector, type Serializer, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/**
 * Fastify's own response serializer compiler (fast-json-stringify), compiling each distinct response
 * schema once per set of shared schemas instead of once per route and status. Every route answers its
 * 4xx and 5xx with the same error envelope, and a `ref(...)` is the same text wherever it is used: at
 * start-up Fastify compiled the envelope twice for each of its routes, three compiles in four. A
 * serializer is a pure function of its schema and the shared schemas, so one serves every route whose
 * schema reads the same; a schema of another text (or another set of shared schemas: an encapsulated
 * scope that adds its own) compiles its own.
 */
export function sharedSerializers(build: SerializerFactory = SerializerSelector()): SerializerFactory {
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options);
    const compiled = new Map<string, Serializer>();
    return (route) => {
      const key = JSON.stringify(route.schema);
      let serializer = compiled.get(key);
      if (serializer === undefined) {
        serializer = compile(route);
        compiled.set(key, serializer);
      }
      return serializer;
    };
  };
}
