import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import { buildTestApp, codeOf, type TestApp } from './helpers/app.ts';
import { makeStripeEvent, signStripePayload, startOpenAiCompatibleFake, type OpenAiCompatibleFake } from './fakes/index.ts';
import { message, send, userWithOpenAiKey, type StreamResult } from './kits/conversations.ts';
import { giveCredits } from './kits/billing.ts';

interface Operation {
  operationId?: string;
  security?: unknown[];
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, { schema?: Schema }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema?: Schema }> }>;
}
type Schema = { $ref?: string; maxLength?: number; properties?: Record<string, Schema>; 'x-sse-events'?: Record<string, Schema> };
interface OpenApiDoc {
  openapi: string;
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; responses?: Record<string, unknown> };
}

const ROOT = path.resolve(import.meta.dirname, '..');
const WEBHOOK_SECRET = 'whsec_openapi_contract_test';
const DOC_ID = 'https://service.invalid/openapi.json';
const pointer = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

function operations(doc: OpenApiDoc): { method: string; path: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([p, methods]) => Object.entries(methods).map(([method, op]) => ({ method: method.toUpperCase(), path: p, op })));
}

/** Checks bodies against the document itself: its paths, responses and components, as a client generator reads them. */
function contract(doc: OpenApiDoc) {
  const ajv = addFormats.default(new Ajv2020({ strict: false, allErrors: true, validateSchema: false }));
  ajv.addSchema({ ...doc, $id: DOC_ID });
  const check = (where: string, data: unknown, label: string): void => {
    const validate = ajv.getSchema(`${DOC_ID}#${where}`);
    assert.ok(validate, `no schema at ${where}`);
    assert.ok(validate(data), `${label} does not match the document: ${JSON.stringify(validate.errors)}\n${JSON.stringify(data)}`);
  };
  return {
    /** A real response against the schema the document gives its operation and status. */
    response(method: string, template: string, res: { statusCode: number; body: string }): void {
      const op = doc.paths[template]?.[method.toLowerCase()];
      assert.ok(op, `${method} ${template} is not documented`);
      const status = String(res.statusCode);
      const key = status in op.responses ? status : `${status[0]}XX`;
      const answer = op.responses[key];
      assert.ok(answer, `${method} ${template} documents no ${status} (${res.body})`);
      if (res.statusCode === 204) {
        assert.equal(res.body, '', `${method} ${template} → 204 has no body`);
        return;
      }
      const where = answer.$ref
        ? `${answer.$ref.slice(1)}/content/${pointer('application/json')}/schema`
        : `/paths/${pointer(template)}/${method.toLowerCase()}/responses/${key}/content/${pointer('application/json')}/schema`;
      check(where, JSON.parse(res.body), `${method} ${template} → ${status}`);
    },
    component(name: string, data: unknown, label: string): void {
      check(`/components/schemas/${name}`, data, label);
    },
  };
}

describe('OpenAPI contract (issue 14, item 12)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let doc: OpenApiDoc;
  let user: string;
  let turn: StreamResult;

  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET } });
    const res = await t.call('GET', '/openapi.json');
    assert.equal(res.statusCode, 200);
    doc = res.json<OpenApiDoc>();
    user = await userWithOpenAiKey(t, fake.validKey, 'contract');
    turn = await send(t, user, null, message('How did my last trade go?'));
    assert.equal(turn.statusCode, 200, turn.body);
  });
  after(async () => {
    await t.close();
    await fake.close();
  });

  describe('the document', () => {
    test('every operation has an operationId, camelCase and unique', () => {
      const ops = operations(doc);
      assert.ok(ops.length >= 31, `only ${ops.length} operations`);
      const missing = ops.filter(({ op }) => op.operationId === undefined).map(({ method, path: p }) => `${method} ${p}`);
      assert.deepEqual(missing, [], 'operations without an operationId');
      const ids = ops.map(({ op }) => op.operationId ?? '');
      for (const id of ids) assert.match(id, /^[a-z][a-zA-Z0-9]*$/, `operationId ${id} is not camelCase`);
      assert.deepEqual(
        ids.filter((id, i) => ids.indexOf(id) !== i),
        [],
        'duplicate operationIds',
      );
    });

    test('the shared schemas are named components; every error answer is the one shared Error response', () => {
      for (const name of [
        'ErrorEnvelope',
        'Account',
        'Brokerage',
        'ProviderKeyListItem',
        'SavedProviderKey',
        'MarketDataKeyStatus',
        'Wallet',
        'LedgerEntry',
        'ConversationListItem',
        'ConversationWithMessages',
        'Message',
        'StripeEvent',
        'Trade',
        'TradePage',
        'TradeImportReport',
        'Journal',
      ]) {
        assert.ok(doc.components.schemas[name], `components.schemas.${name}`);
      }
      assert.ok(doc.components.responses?.['Error'], 'components.responses.Error');
      for (const { method, path: p, op } of operations(doc)) {
        const errors = Object.entries(op.responses).filter(([status]) => !status.startsWith('2'));
        for (const status of ['4XX', '5XX']) assert.ok(op.responses[status], `${method} ${p} documents ${status}`);
        for (const [status, answer] of errors) assert.deepEqual(answer, { $ref: '#/components/responses/Error' }, `${method} ${p} ${status}`);
      }
      // The envelope is written once, not copied into each route.
      assert.equal(JSON.stringify(doc).split('"requestId":{').length - 1, 1);
    });

    test('servers: relative, so the document is right behind whatever host serves it', () => {
      assert.match(doc.openapi, /^3\.1\./);
      assert.deepEqual(
        doc.servers?.map((s) => s.url),
        ['/'],
      );
    });

    test('the Stripe webhook documents its Stripe-Signature header and its event body, and a real signed event matches them', async () => {
      const op = doc.paths['/api/billing/webhooks/stripe']?.['post'];
      assert.ok(op);
      assert.deepEqual(op.security, []);
      assert.deepEqual(
        op.parameters?.map((p) => [p.in, p.name, p.required]),
        [['header', 'Stripe-Signature', true]],
      );
      assert.equal(op.requestBody?.content['application/json']?.schema?.$ref, '#/components/schemas/StripeEvent');
      const api = contract(doc);
      const event = makeStripeEvent('customer.created', { id: 'cus_123', object: 'customer' });
      api.component('StripeEvent', event, 'a Stripe event');
      const payload = JSON.stringify(event);
      const signed = await t.call('POST', '/api/billing/webhooks/stripe', {
        body: payload,
        headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, WEBHOOK_SECRET) },
      });
      assert.equal(signed.statusCode, 200, signed.body);
      api.response('POST', '/api/billing/webhooks/stripe', signed);
      const forged = await t.call('POST', '/api/billing/webhooks/stripe', {
        body: payload,
        headers: { 'content-type': 'application/json', 'stripe-signature': signStripePayload(payload, 'whsec_another') },
      });
      assert.equal(codeOf(forged), 'INVALID_SIGNATURE');
      api.response('POST', '/api/billing/webhooks/stripe', forged);
    });

    test('DESIGN §12: the resume route documents its Last-Event-ID header beside ?lastEventId=, and a resume by the header alone works', async () => {
      const op = doc.paths['/api/advisor/conversations/{id}/stream']?.['get'];
      assert.ok(op);
      const header = op.parameters?.find((p) => p.in === 'header' && p.name === 'Last-Event-ID');
      assert.ok(header, JSON.stringify(op.parameters));
      assert.notEqual(header.required, true);
      assert.ok(op.parameters?.some((p) => p.in === 'query' && p.name === 'lastEventId'));
      const conversation = String(turn.frames[0]?.data['conversationId']);
      const last = turn.frames.at(-1);
      assert.ok(last);
      // The client holds the terminal frame: 204, the answer that stops an EventSource reconnecting.
      const res = await t.call('GET', `/api/advisor/conversations/${conversation}/stream`, { user, headers: { 'last-event-id': String(last.id) } });
      assert.equal(res.statusCode, 204, res.body);
    });

    test('DESIGN §10: /metrics documents its Prometheus text answer and its 401 / 404 refusals; a real scrape matches', async () => {
      const op = doc.paths['/metrics']?.['get'];
      assert.ok(op);
      const types = Object.keys(op.responses['200']?.content ?? {});
      assert.deepEqual(types, ['text/plain; version=0.0.4; charset=utf-8']);
      for (const status of ['401', '404']) assert.deepEqual(op.responses[status], { $ref: '#/components/responses/Error' }, status);
      const url = await t.app.listen({ port: 0, host: '127.0.0.1' });
      const scrape = await fetch(`${url}/metrics`);
      assert.equal(scrape.status, 200);
      assert.equal(scrape.headers.get('content-type'), types[0]);
      const relayed = await fetch(`${url}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.7' } });
      assert.equal(relayed.status, 404);
      assert.equal(((await relayed.json()) as { error: { code: string } }).error.code, 'NOT_FOUND');
    });

    test('DESIGN §2: POST /api/local-sign-in (README) is documented, with its body and token answer, also where it answers 404', () => {
      const op = doc.paths['/api/local-sign-in']?.['post'];
      assert.ok(op, 'POST /api/local-sign-in is documented');
      assert.equal(op.operationId, 'signInLocally');
      assert.deepEqual(op.security, []);
      assert.ok(op.requestBody?.content['application/json']?.schema);
      assert.ok(op.responses['200']?.content?.['application/json']?.schema);
      assert.deepEqual(op.responses['404'], { $ref: '#/components/responses/Error' });
      assert.ok(doc.paths['/api/local-sign-in']?.['get'], 'GET /api/local-sign-in is documented');
    });

    test('the stream names a schema per event (DESIGN §7, §12: `snapshot` on attaching), and the frames of a real turn match them', () => {
      for (const [p, method] of [
        ['/api/advisor/conversations/new/messages/stream', 'post'],
        ['/api/advisor/conversations/{id}/messages/stream', 'post'],
        ['/api/advisor/conversations/{id}/stream', 'get'],
      ] as const) {
        const events = doc.paths[p]?.[method]?.responses['200']?.content?.['text/event-stream']?.schema?.['x-sse-events'];
        assert.ok(events, `${p} names its frames`);
        assert.deepEqual(Object.keys(events), ['start', 'snapshot', 'delta', 'tool_call', 'tool_result', 'done', 'error']);
        for (const schema of Object.values(events))
          assert.ok(doc.components.schemas[String(schema.$ref).replace('#/components/schemas/', '')], String(schema.$ref));
      }
      const events =
        doc.paths['/api/advisor/conversations/new/messages/stream']?.['post']?.responses['200']?.content?.['text/event-stream']?.schema?.['x-sse-events'] ?? {};
      const api = contract(doc);
      assert.deepEqual([...new Set(turn.frames.map((f) => f.event))], ['start', 'delta', 'done']);
      for (const frame of turn.frames) {
        const name = events[frame.event]?.$ref?.replace('#/components/schemas/', '');
        assert.ok(name, `event ${frame.event} is documented`);
        api.component(name, frame.data, `the ${frame.event} frame`);
      }
    });

    test('documented length limits are the ones the service enforces (names 100, conversation titles 200)', async () => {
      const bodySchema = (method: string, p: string): Schema | undefined => doc.paths[p]?.[method]?.requestBody?.content['application/json']?.schema;
      const accountName = bodySchema('post', '/api/accounts')?.properties?.['name']?.maxLength;
      const renamedName = bodySchema('put', '/api/accounts/{id}')?.properties?.['name']?.maxLength;
      const brokerageName = bodySchema('post', '/api/brokerages')?.properties?.['name']?.maxLength;
      const title = bodySchema('patch', '/api/advisor/conversations/{id}')?.properties?.['title']?.maxLength;
      assert.deepEqual([accountName, renamedName, brokerageName, title], [100, 100, 100, 200]);

      const owner = `limits-${randomUUID()}`;
      const account = (name: string) => ({ name, currency: 'USD', timezone: 'UTC', startingBalance: '10' });
      assert.equal((await t.call('POST', '/api/accounts', { user: owner, body: account('a'.repeat(100)) })).statusCode, 201);
      assert.equal(codeOf(await t.call('POST', '/api/accounts', { user: owner, body: account('b'.repeat(101)) })), 'VALIDATION_ERROR');
      assert.equal((await t.call('POST', '/api/brokerages', { user: owner, body: { name: 'c'.repeat(100) } })).statusCode, 201);
      assert.equal(codeOf(await t.call('POST', '/api/brokerages', { user: owner, body: { name: 'd'.repeat(101) } })), 'VALIDATION_ERROR');
      const conversation = `/api/advisor/conversations/${String(turn.frames[0]?.data['conversationId'])}`;
      assert.equal((await t.call('PATCH', conversation, { user, body: { title: 'e'.repeat(200) } })).statusCode, 200);
      assert.equal(codeOf(await t.call('PATCH', conversation, { user, body: { title: 'f'.repeat(201) } })), 'VALIDATION_ERROR');
    });
  });

  test('real responses match the document: 2xx bodies and error envelopes', async () => {
    const api = contract(doc);
    const owner = `contract-${randomUUID()}`;
    await giveCredits(t, owner, 50);
    const call = async (
      method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
      template: string,
      url: string,
      expect: number,
      o: { body?: unknown; user?: string | null } = {},
    ) => {
      const res = await t.call(method, url, { user: o.user === undefined ? owner : o.user, ...(o.body !== undefined ? { body: o.body } : {}) });
      assert.equal(res.statusCode, expect, `${method} ${url}: ${res.body}`);
      api.response(method, template, res);
      return res;
    };
    const brokerage = (await call('POST', '/api/brokerages', '/api/brokerages', 201, { body: { name: 'IBKR' } })).json<{ id: string }>();
    await call('GET', '/api/brokerages', '/api/brokerages', 200);
    const body = { name: 'Main', currency: 'usd', timezone: 'asia/calcutta', startingBalance: '1000.50', brokerageId: brokerage.id };
    const account = (await call('POST', '/api/accounts', '/api/accounts', 201, { body })).json<{ id: string }>();
    await call('GET', '/api/accounts', '/api/accounts', 200);
    await call('GET', '/api/accounts/{id}', `/api/accounts/${account.id}`, 200);
    await call('PUT', '/api/accounts/{id}', `/api/accounts/${account.id}`, 200, { body: { brokerageId: null } });
    await call('GET', '/api/accounts/{id}/trading-day', `/api/accounts/${account.id}/trading-day?at=2030-01-01T00:00:00Z`, 200);
    // DESIGN §14: trades, their import, the journal.
    const fill = { symbol: 'AAPL', side: 'buy', quantity: '2', price: '10.5', executedAt: '2026-01-02T15:00:00Z', externalId: 'contract-1', tags: ['x'] };
    const trade = (await call('POST', '/api/accounts/{id}/trades', `/api/accounts/${account.id}/trades`, 201, { body: fill })).json<{ id: string }>();
    await call('POST', '/api/accounts/{id}/trades', `/api/accounts/${account.id}/trades`, 200, { body: fill });
    await call('POST', '/api/accounts/{id}/trades', `/api/accounts/${account.id}/trades`, 409, { body: { ...fill, price: '11' } });
    await call('GET', '/api/accounts/{id}/trades', `/api/accounts/${account.id}/trades?limit=5`, 200);
    await call('PATCH', '/api/accounts/{id}/trades/{tradeId}', `/api/accounts/${account.id}/trades/${trade.id}`, 200, { body: { note: 'n' } });
    const imported = await t.call('POST', `/api/accounts/${account.id}/trades/import`, {
      user: owner,
      body: 'symbol,side,quantity,price,executedAt\nAAPL,SLD,1,12,2026-01-03T15:00:00Z\nAAPL,?,1,12,2026-01-03T15:00:00Z\n',
      headers: { 'content-type': 'text/csv' },
    });
    assert.equal(imported.statusCode, 200, imported.body);
    api.response('POST', '/api/accounts/{id}/trades/import', imported);
    assert.ok(doc.paths['/api/accounts/{id}/trades/import']?.['post']?.requestBody?.content['text/csv'], 'the import documents its text/csv body');
    assert.ok(doc.paths['/api/accounts/{id}/trades/export']?.['get']?.responses['200']?.content?.['text/csv'], 'the export documents its text/csv answer');
    await call('GET', '/api/accounts/{id}/journal', `/api/accounts/${account.id}/journal?from=2026-01-01&to=2026-01-31`, 200);
    await call('DELETE', '/api/accounts/{id}/trades/{tradeId}', `/api/accounts/${account.id}/trades/${trade.id}`, 204);
    await call('GET', '/api/billing/packs', '/api/billing/packs', 200);
    await call('GET', '/api/billing/wallet', '/api/billing/wallet', 200);
    await call('GET', '/api/billing/ledger', '/api/billing/ledger?limit=5', 200);
    await call('GET', '/api/advisor/provider-keys', '/api/advisor/provider-keys', 200, { user });
    await call('GET', '/api/advisor/market-data-key', '/api/advisor/market-data-key', 200);
    const conversation = String(turn.frames[0]?.data['conversationId']);
    await call('GET', '/api/advisor/conversations', '/api/advisor/conversations', 200, { user });
    await call('GET', '/api/advisor/conversations/{id}', `/api/advisor/conversations/${conversation}`, 200, { user });
    await call('GET', '/healthz', '/healthz', 200, { user: null });

    // Error envelopes: authentication, validation with details, not found, conflict, and a checkout with no payments.
    await call('GET', '/api/accounts', '/api/accounts', 401, { user: null });
    const invalid = await call('POST', '/api/accounts', '/api/accounts', 400, { body: { ...body, name: 'Other', startingBalance: 'lots' } });
    assert.ok(invalid.json<{ error: { details?: unknown[] } }>().error.details?.length);
    await call('GET', '/api/accounts/{id}', `/api/accounts/${randomUUID()}`, 404);
    await call('POST', '/api/accounts', '/api/accounts', 409, { body: { ...body, name: 'MAIN' } });
    await call('DELETE', '/api/advisor/market-data-key', '/api/advisor/market-data-key', 404);
    await call('POST', '/api/billing/checkout', '/api/billing/checkout', 402, { body: { packId: 'credits_500' } });
    await call('DELETE', '/api/accounts/{id}', `/api/accounts/${account.id}`, 204);
  });

  test('a client generated from /openapi.json (openapi-typescript) type-checks typed calls (openapi-fetch) with tsc', async () => {
    const generated = astToString(await openapiTS(doc as unknown as OpenAPI3));
    assert.equal(generated.match(/^\s*ErrorEnvelope: \{/gm)?.length, 1, 'ErrorEnvelope is one component');
    assert.equal(generated.match(/requestId: string/g)?.length, 1, 'the envelope is written once');

    const dir = mkdtempSync(path.join(os.tmpdir(), 'openapi-client-'));
    try {
      symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
      writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
      writeFileSync(path.join(dir, 'api.ts'), generated);
      writeFileSync(path.join(dir, 'calls.ts'), TYPED_CALLS);
      writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'es2024',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            lib: ['es2024'],
            types: ['node'],
            strict: true,
            noUncheckedIndexedAccess: true,
            allowImportingTsExtensions: true,
            noEmit: true,
          },
          files: ['calls.ts'],
        }),
      );
      const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      const result = await promisify(execFile)(process.execPath, [tsc, '-p', dir]).then(
        () => ({ code: 0, output: '' }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, output: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
      );
      assert.equal(result.code, 0, result.output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Calls a front end would write; `@ts-expect-error` lines prove the types refuse what the service refuses. */
const TYPED_CALLS = `
import createClient from 'openapi-fetch';
import type { components, operations, paths } from './api.ts';

type Schemas = components['schemas'];
const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:3000', headers: { authorization: 'Bearer token' } });

export async function frontEnd(): Promise<void> {
  const created = await client.POST('/api/accounts', {
    body: { name: 'Main', currency: 'USD', timezone: 'Europe/Paris', startingBalance: '1000.50', brokerageId: null },
  });
  if (created.data) {
    const account: Schemas['Account'] = created.data;
    const balance: string = account.startingBalance;
    const brokerage: string | null = account.brokerageId;
    void [balance, brokerage];
  } else {
    const code: Schemas['ErrorEnvelope']['error']['code'] = created.error.error.code;
    const taken: typeof code = 'ACCOUNT_NAME_TAKEN';
    void taken;
  }

  const accounts = await client.GET('/api/accounts');
  const names: string[] = accounts.data?.items.map((a) => a.name) ?? [];

  const saved = await client.PUT('/api/advisor/provider-keys/{provider}', {
    params: { path: { provider: 'anthropic' } },
    body: { apiKey: 'sk-ant-0123456789' },
  });
  const verified: boolean | undefined = saved.data?.verified;

  const wallet = await client.GET('/api/billing/wallet');
  const remaining: number | undefined = wallet.data?.allowance.remaining;

  const ledger = await client.GET('/api/billing/ledger', { params: { query: { limit: 10 } } });
  const kinds: Schemas['LedgerEntry']['kind'][] = ledger.data?.items.map((e) => e.kind) ?? [];

  const conversations = await client.GET('/api/advisor/conversations', { params: { query: { limit: 5 } } });
  const titles: string[] = conversations.data?.items.map((c) => c.title) ?? [];

  const done: Schemas['StreamDoneFrame'] = {
    finishReason: 'stop',
    usage: { inputTokens: 1, outputTokens: 2, cachedInputTokens: null, reasoningTokens: null, estimatedCostUsd: null },
  };
  const usage = await client.GET('/api/advisor/usage', { params: { query: { from: '2026-01-01', groupBy: 'model' } } });
  const cost: number | null | undefined = usage.data?.total.estimatedCostUsd;
  const signature: operations['receiveStripeWebhook']['parameters']['header']['Stripe-Signature'] = 't=1,v1=00';

  // @ts-expect-error: not a provider
  await client.PUT('/api/advisor/provider-keys/{provider}', { params: { path: { provider: 'acme' } }, body: { apiKey: 'x' } });
  // @ts-expect-error: a timezone is a string
  await client.PUT('/api/accounts/{id}', { params: { path: { id: 'a' } }, body: { timezone: 7 } });
  // @ts-expect-error: the body is required
  await client.POST('/api/accounts', {});

  void [names, verified, remaining, kinds, titles, done, cost, signature];
}
`;
