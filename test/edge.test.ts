import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { OpenAiCompatibleFake } from './fakes/index.ts';
import { buildTestApp, codeOf, type TestApp } from './helpers/app.ts';
import { rawExchange } from './helpers/net.ts';
import { appOnOpenAiFake } from './kits/conversations.ts';

/** Rules every route obeys at the edge, before any feature code runs (DESIGN §3, §10). */
describe('http edge rules', () => {
  let t: TestApp;
  let fake: OpenAiCompatibleFake;
  let close: () => Promise<void>;
  before(async () => ({ t, fake, close } = await appOnOpenAiFake()));
  after(() => close());

  const newUser = () => `u-${randomUUID()}`;
  const account = (name: string) => ({ name, currency: 'USD', timezone: 'UTC', startingBalance: '100' });

  describe('DESIGN §10: text PostgreSQL cannot store', () => {
    const refused = (res: { statusCode: number; body: string; json<T>(): T }, code = 'VALIDATION_ERROR') => {
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(codeOf(res), code);
    };

    test('DESIGN §10: \\u0000 in an account name (create and update) → 400 VALIDATION_ERROR, nothing stored', async () => {
      const u = newUser();
      refused(await t.call('POST', '/api/accounts', { user: u, body: account('Main\u0000') }));
      const created = await t.call('POST', '/api/accounts', { user: u, body: account('Main') });
      assert.equal(created.statusCode, 201, created.body);
      const id = created.json<{ id: string }>().id;
      refused(await t.call('PUT', `/api/accounts/${id}`, { user: u, body: { name: '\u0000' } }));
      refused(await t.call('PUT', `/api/accounts/${id}`, { user: u, body: { timezone: 'UTC\u0000' } }));
      const list = (await t.call('GET', '/api/accounts', { user: u })).json<{ items: { name: string; timezone: string }[] }>().items;
      assert.deepEqual(
        list.map((a) => [a.name, a.timezone]),
        [['Main', 'Etc/UTC']],
      );
    });

    test('DESIGN §10: \\u0000 or an unpaired surrogate in a brokerage name → 400 VALIDATION_ERROR', async () => {
      const u = newUser();
      refused(await t.call('POST', '/api/brokerages', { user: u, body: { name: 'IBKR\u0000' } }));
      refused(await t.call('POST', '/api/brokerages', { user: u, body: '{"name":"IBKR \\ud800"}', headers: { 'content-type': 'application/json' } }));
      assert.deepEqual((await t.call('GET', '/api/brokerages', { user: u })).json(), { items: [] });
    });

    test('DESIGN §10: \\u0000 in a conversation title (PATCH) → 400 VALIDATION_ERROR', async () => {
      const u = newUser();
      const res = await t.call('PATCH', `/api/advisor/conversations/${randomUUID()}`, { user: u, body: { title: 'Plan\u0000' } });
      refused(res);
      assert.deepEqual(res.json<{ error: { details: unknown } }>().error.details, [
        { path: '/title', message: 'body must not contain \\u0000 or an unpaired surrogate' },
      ]);
    });

    test('DESIGN §10: \\u0000 in the stream text → 400 VALIDATION_ERROR; nothing stored, no provider called', async () => {
      const u = newUser();
      const saved = await t.call('PUT', '/api/advisor/provider-keys/openai', { user: u, body: { apiKey: fake.validKey } });
      assert.equal(saved.statusCode, 200, saved.body);
      const calls = fake.requests.length;
      const res = await t.call('POST', '/api/advisor/conversations/new/messages/stream', {
        user: u,
        body: { text: 'Was my entry\u0000 too early?', clientMessageId: randomUUID() },
      });
      refused(res);
      assert.equal(fake.requests.length, calls);
      assert.deepEqual((await t.call('GET', '/api/advisor/conversations', { user: u })).json(), { items: [], nextCursor: null });
    });

    test('DESIGN §10 with spec 4.2: \\u0000 in defaultModel on a key save → 400 with the route’s own code PROVIDER_KEY_INVALID; nothing stored, no probe', async () => {
      const u = newUser();
      const calls = fake.requests.length;
      const res = await t.call('PUT', '/api/advisor/provider-keys/openai', { user: u, body: { apiKey: fake.validKey, defaultModel: 'gpt-4o\u0000' } });
      refused(res, 'PROVIDER_KEY_INVALID');
      assert.equal(fake.requests.length, calls);
      assert.deepEqual((await t.call('GET', '/api/advisor/provider-keys', { user: u })).json(), { items: [] });
      // PATCH names no key of its own: its body failures are VALIDATION_ERROR.
      refused(await t.call('PATCH', '/api/advisor/provider-keys/openai', { user: u, body: { defaultModel: 'x\u0000' } }));
    });

    test('DESIGN §10: \\u0000 in a query string or path parameter → 400 VALIDATION_ERROR', async () => {
      const u = newUser();
      refused(await t.call('GET', '/api/advisor/conversations?cursor=abc%00def', { user: u }));
      refused(await t.call('GET', '/api/billing/ledger?cursor=%00', { user: u }));
      refused(await t.call('GET', '/api/accounts/%00', { user: u }));
    });
  });

  describe('DESIGN §3: query strings', () => {
    test('DESIGN §3: limit=0x10 (or 1e1, " 16", +16, 16.0) on a paginated list → 400 VALIDATION_ERROR; limit=16 → 200', async () => {
      const u = newUser();
      for (const list of ['/api/advisor/conversations', `/api/advisor/conversations/${randomUUID()}`, '/api/billing/ledger']) {
        for (const limit of ['0x10', '1e1', '%2016', '%2B16', '16.0', '0b10', '']) {
          const res = await t.call('GET', `${list}?limit=${limit}`, { user: u });
          assert.equal(res.statusCode, 400, `${list}?limit=${limit}: ${res.body}`);
          assert.equal(codeOf(res), 'VALIDATION_ERROR');
        }
      }
      assert.equal((await t.call('GET', '/api/advisor/conversations?limit=16', { user: u })).statusCode, 200);
      assert.equal((await t.call('GET', '/api/billing/ledger?limit=16', { user: u })).statusCode, 200);
    });
  });

  describe('DESIGN §3: what the server refuses before a route runs is answered in the envelope', () => {
    let port: number;
    let base: string;
    before(async () => {
      base = await t.app.listen({ port: 0, host: '127.0.0.1' });
      port = Number(new URL(base).port);
    });

    type Envelope = { error: { code: string; requestId: string; message: string } };
    const envelopeOf = (body: string): Envelope => JSON.parse(body) as Envelope;

    test('DESIGN §3: a 20 KB bearer token → 431 HEADERS_TOO_LARGE in the envelope, with its request id', async () => {
      const res = await fetch(`${base}/api/accounts`, { headers: { authorization: `Bearer ${'a'.repeat(20_000)}.b.c` } });
      assert.equal(res.status, 431);
      const body = envelopeOf(await res.text());
      assert.equal(body.error.code, 'HEADERS_TOO_LARGE');
      assert.equal(body.error.requestId, res.headers.get('x-request-id'));
    });

    test('DESIGN §3: an X-Request-Id of 200 characters is replaced, and the answer is the envelope', async () => {
      const res = await fetch(`${base}/api/accounts`, { headers: { 'x-request-id': 'r'.repeat(200) } });
      assert.equal(res.status, 401);
      const body = envelopeOf(await res.text());
      assert.equal(body.error.code, 'UNAUTHENTICATED');
      assert.match(String(res.headers.get('x-request-id')), /^req_/);
      assert.equal(body.error.requestId, res.headers.get('x-request-id'));
    });

    test('DESIGN §3: request headers beyond what the server parses → 431 HEADERS_TOO_LARGE in the envelope, and the client reads it (no reset)', async () => {
      for (const big of [{ 'x-padding': 'p'.repeat(40_000) }, { authorization: `Bearer ${'a'.repeat(40_000)}` }]) {
        const [name, value] = Object.entries(big)[0] ?? [];
        const head = `GET /api/accounts HTTP/1.1\r\nhost: 127.0.0.1\r\n${name}: ${value}\r\n\r\n`;
        // More bytes follow the head, as a client streaming a request would send them.
        const res = await rawExchange(port, [head, 'x'.repeat(64 * 1024)]);
        assert.equal(res.error, undefined, `connection reset before the answer was read: ${res.raw.slice(0, 200)}`);
        assert.equal(res.status, 431, res.raw.slice(0, 300));
        assert.match(res.headers['content-type'] ?? '', /^application\/json/);
        const body = envelopeOf(res.body);
        assert.equal(body.error.code, 'HEADERS_TOO_LARGE');
        assert.equal(body.error.requestId, res.headers['x-request-id']);
      }
    });

    test('DESIGN §3: bytes that are not HTTP → 400 VALIDATION_ERROR in the envelope', async () => {
      const res = await rawExchange(port, ['GET /healthz HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n']);
      assert.equal(res.status, 400, res.raw);
      assert.equal(envelopeOf(res.body).error.code, 'VALIDATION_ERROR');
    });

    test('DESIGN §3: a path parameter longer than any id → 414 URI_TOO_LONG, a malformed one → 400 VALIDATION_ERROR, in the envelope', async () => {
      const u = newUser();
      const res = await t.call('GET', `/api/accounts/${'a'.repeat(300)}`, { user: u });
      assert.equal(res.statusCode, 414, res.body);
      assert.equal(codeOf(res), 'URI_TOO_LONG');
      assert.equal(res.json<Envelope>().error.requestId, res.headers['x-request-id']);
      const malformed = await t.call('GET', '/api/accounts/%E0%A4%A', { user: u });
      assert.equal(malformed.statusCode, 400, malformed.body);
      assert.equal(codeOf(malformed), 'VALIDATION_ERROR');
    });
  });

  describe('DESIGN §10 and issue 14 item 9: bounded requests', () => {
    const TIMEOUT_MS = 600;
    let slow: TestApp;
    let port: number;
    before(async () => {
      slow = await buildTestApp({
        shareWith: t,
        env: { OPENAI_BASE_URL: fake.url, REQUEST_TIMEOUT_MS: String(TIMEOUT_MS), STRIPE_WEBHOOK_SECRET: 'whsec_edge_test' },
      });
      port = Number(new URL(await slow.app.listen({ port: 0, host: '127.0.0.1' })).port);
    });
    after(async () => slow.close());

    const trickle = (n: number) => Array.from({ length: n }, () => 'x');
    const assertTimedOut = (res: Awaited<ReturnType<typeof rawExchange>>) => {
      assert.equal(res.status, 408, res.raw);
      const body = JSON.parse(res.body) as { error: { code: string; requestId: string } };
      assert.equal(body.error.code, 'REQUEST_TIMEOUT');
      assert.equal(body.error.requestId, res.headers['x-request-id']);
      assert.ok(res.closedAfterMs < TIMEOUT_MS + 1500, `closed after ${res.closedAfterMs} ms`);
      assert.ok(res.closedAfterMs >= TIMEOUT_MS - 50, `closed after ${res.closedAfterMs} ms`);
    };

    test('DESIGN §10: REQUEST_TIMEOUT_MS defaults to 60 s', () => {
      assert.equal(t.deps.config.requestTimeoutMs, 60_000);
    });

    test('DESIGN §10: a body trickled into the public webhook is cut after REQUEST_TIMEOUT_MS: 408 REQUEST_TIMEOUT in the envelope, socket closed, nothing written', async () => {
      const before = (await slow.deps.db.selectFrom('ledger_entries').select('seq').execute()).length;
      const head =
        'POST /api/billing/webhooks/stripe HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nstripe-signature: t=1,v1=00\r\ncontent-length: 1000\r\n\r\n{';
      assertTimedOut(await rawExchange(port, [head, ...trickle(40)], 100));
      assert.equal((await slow.deps.db.selectFrom('ledger_entries').select('seq').execute()).length, before);
    });

    test('DESIGN §10: a body trickled into an authenticated route is cut the same way and never reaches the route', async () => {
      const u = newUser();
      const token = await slow.token(u);
      const body = JSON.stringify(account('Slow'));
      const head = `POST /api/accounts HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
      assertTimedOut(await rawExchange(port, [head, ...body.slice(0, -1).split('').slice(0, 30)], 100));
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepEqual((await slow.call('GET', '/api/accounts', { user: u })).json(), { items: [] });
    });

    test('DESIGN §10: headers trickled in slower than REQUEST_TIMEOUT_MS → 408 REQUEST_TIMEOUT in the envelope, socket closed', async () => {
      const res = await rawExchange(port, ['GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ', ...trickle(40)], 100);
      assertTimedOut(res);
    });

    test('DESIGN §10: REQUEST_TIMEOUT_MS bounds receiving a request, not answering it: a stream that outlasts it is not cut', async () => {
      const u = newUser();
      assert.equal((await slow.call('PUT', '/api/advisor/provider-keys/openai', { user: u, body: { apiKey: fake.validKey } })).statusCode, 200);
      fake.enqueueStream({ chunks: ['a', 'b', 'c', 'd', 'e'], delayMs: 300 });
      const res = await fetch(`http://127.0.0.1:${port}/api/advisor/conversations/new/messages/stream`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await slow.token(u)}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'Take your time', clientMessageId: randomUUID() }),
      });
      assert.equal(res.status, 200);
      const body = await res.text();
      assert.match(body, /event: done/);
      assert.equal([...body.matchAll(/event: delta\ndata: (\{.*\})/g)].map((m) => (JSON.parse(m[1] ?? '{}') as { text: string }).text).join(''), 'abcde');
    });

    test('issue 14 item 9: a body over 16 KiB on a small JSON route → 413 PAYLOAD_TOO_LARGE at once, unread', async () => {
      const u = newUser();
      const res = await slow.call('POST', '/api/accounts', { user: u, body: { ...account('Big'), pad: 'x'.repeat(17 * 1024) } });
      assert.equal(res.statusCode, 413, res.body);
      assert.equal(codeOf(res), 'PAYLOAD_TOO_LARGE');
      // Announced as 18 MB and never sent: the answer comes from the Content-Length alone.
      const token = await slow.token(u);
      const head = `POST /api/brokerages HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: 18000000\r\nconnection: close\r\n\r\n{"name":"`;
      const raw = await rawExchange(port, [head]);
      assert.equal(raw.status, 413, raw.raw);
      assert.equal((JSON.parse(raw.body) as { error: { code: string } }).error.code, 'PAYLOAD_TOO_LARGE');
      assert.ok(raw.closedAfterMs < TIMEOUT_MS, `answered after ${raw.closedAfterMs} ms`);
    });

    test('issue 14 item 9: the stream routes keep the MAX_BODY_BYTES cap (a 100 KB message streams)', async () => {
      const u = newUser();
      assert.equal((await slow.call('PUT', '/api/advisor/provider-keys/openai', { user: u, body: { apiKey: fake.validKey } })).statusCode, 200);
      const res = await slow.call('POST', '/api/advisor/conversations/new/messages/stream', {
        user: u,
        body: { text: '📈'.repeat(25_000), clientMessageId: randomUUID() },
      });
      assert.equal(res.statusCode, 200, res.body.slice(0, 300));
      assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    });
  });
});
