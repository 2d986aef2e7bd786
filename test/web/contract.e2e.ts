// Issue 18: the client is typed against the service's own contract. Runs with the browser tests
// (npm run test:web, once per CI run): it type-checks the whole client twice.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import ts from 'typescript';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import { buildTestApp } from '../helpers/app.ts';

describe('web client: typed against the contract', () => {
  test('issue 18: the client type-checks against types generated from /openapi.json, and a contract change (a renamed response field) breaks its build', async () => {
    const t = await buildTestApp({ env: { AUTH_JWT_SECRET: undefined, DATABASE_URL: undefined, REDIS_URL: undefined } });
    let doc: OpenAPI3;
    try {
      doc = (await t.call('GET', '/openapi.json')).json<OpenAPI3>();
    } finally {
      await t.close();
    }
    const check = async (d: OpenAPI3) => {
      const types = astToString(await openapiTS(d));
      return clientDiagnostics(types);
    };
    assert.deepEqual(await check(doc), []);
    const changed = structuredClone(doc) as unknown as {
      components: { schemas: Record<string, { properties: Record<string, unknown>; required?: string[] }> };
    };
    const item = changed.components.schemas['ProviderKeyListItem'];
    assert.ok(item?.properties['keyHintTail']);
    item.properties['keyTail'] = item.properties['keyHintTail'];
    delete item.properties['keyHintTail'];
    item.required = item.required?.map((r) => (r === 'keyHintTail' ? 'keyTail' : r));
    const errors = await check(changed as unknown as OpenAPI3);
    assert.ok(
      errors.some((e) => /Keys\.tsx.*keyHintTail/.test(e)),
      errors.join('\n'),
    );
  });
});

/** `tsc -p web` with the generated API types replaced by `types` (in memory; the working tree is not touched). */
function clientDiagnostics(types: string): string[] {
  const webDir = path.resolve(import.meta.dirname, '../../web');
  const schemaFile = path.join(webDir, 'src/api/schema.d.ts');
  const config = ts.getParsedCommandLineOfConfigFile(
    path.join(webDir, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  );
  assert.ok(config);
  const host = ts.createCompilerHost(config.options);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.readFile = (f) => (path.resolve(f) === schemaFile ? types : readFile(f));
  host.fileExists = (f) => path.resolve(f) === schemaFile || fileExists(f);
  const program = ts.createProgram({ rootNames: [...new Set([...config.fileNames, schemaFile])], options: config.options, host });
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${d.file ? path.relative(webDir, d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}
