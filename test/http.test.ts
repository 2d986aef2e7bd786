import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mintToken } from '../src/http/auth.ts';
import { BODY_CAP_FLOOR } from '../src/config.ts';
import { TEST_JWT_SECRET, buildTestApp, codeOf, type TestApp } from './helpers/app.ts';
import { ManualClock } from './helpers/manual-clock.ts';

type OpenApi = { paths: Record<string, Record<string, { security?: unknown[]; responses?: Record<string, unknown> }>> };

/** Every authenticated operation of the OpenAPI document, with sample path parameters filled in. */
function authenticatedOperations(doc: OpenApi): { method: string; url: string }[] {
  const ops: { method: string; url: string }[] = [];
  for (const [p, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      if (Array.isArray(op.security) && op.security.length === 0) continue;
      const url = p.replace('{provider}', 'openai').replace(/\{[^}]+\}/g, randomUUID());
      ops.push({ method: method.toUpperCase(), url });
    }
  }
  return ops;
}

describe('http foundation', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp();
  });
  after(async () => t.close());

  describe('security suite: every authenticated route', () => {
    test('DESIGN §2: no token, a malformed one, an expired one, or one signed with another secret → 401 UNAUTHENTICATED', async () => {
      const doc = (await t.call('GET', '/openapi.json')).json<OpenApi>();
      const ops = authenticatedOperations(doc);
      assert.ok(ops.length >= 9, `only ${ops.length} authenticated operations documented`);
      const expired = await mintToken(TEST_JWT_SECRET, 'u-sec', { now: new Date(Date.now() - 7200_000), ttlSeconds: 60 });
      const forged = await mintToken('another-secret-0123456789abcdef0123456789', 'u-sec');
      const noSub = await mintToken(TEST_JWT_SECRET, '', {});
      const variants: [string, Record<string, string>][] = [
        ['none', {}],
        ['malformed', { authorization: 'Bearer not.a.jwt!' }],
        ['wrong scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
        ['expired', { authorization: `Bearer ${expired}` }],
        ['other secret', { authorization: `Bearer ${forged}` }],
        ['empty subject', { authorization: `Bearer ${noSub}` }],
      ];
      for (const op of ops) {
        for (const [name, headers] of variants) {
          const res = await t.app.inject({
            method: op.method as 'GET',
            url: op.url,
            headers: { ...headers, 'content-type': 'application/json' },
            payload: op.method === 'GET' || op.method === 'DELETE' ? undefined : '{}',
          });
          assert.equal(res.statusCode, 401, `${op.method} ${op.url} with ${name} token: ${res.body}`);
          assert.equal(JSON.parse(res.body).error.code, 'UNAUTHENTICATED');
          assert.ok(res.headers['x-request-id']);
        }
      }
    });

    test('DESIGN §2: a token accepted once is refused with 401 UNAUTHENTICATED as soon as it expires', async () => {
      const clock = new ManualClock(new Date('2030-06-01T00:00:00Z'));
      const other = await buildTestApp({ clock });
      try {
        const token = await mintToken(TEST_JWT_SECRET, 'u-exp', { now: clock.now(), ttlSeconds: 30 });
        const headers = { authorization: `Bearer ${token}` };
        assert.equal((await other.call('GET', '/api/accounts', { headers })).statusCode, 200);
        clock.advance(29_000);
        assert.equal((await other.call('GET', '/api/accounts', { headers })).statusCode, 200);
        clock.advance(1_000);
        const res = await other.call('GET', '/api/accounts', { headers });
        assert.equal(res.statusCode, 401);
        assert.equal(codeOf(res), 'UNAUTHENTICATED');
      } finally {
        await other.close();
      }
    });

    test('DESIGN §2: a user row is created the first time a valid token is seen', async () => {
      const id = `u-first-${randomUUID()}`;
      assert.equal(await t.deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst(), undefined);
      assert.equal((await t.call('GET', '/api/accounts', { user: id })).statusCode, 200);
      assert.ok(await t.deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst());
    });
  });

  describe('errors and envelope', () => {
    test('DESIGN §3: unknown route → 404 NOT_FOUND in the envelope with a requestId', async () => {
      const res = await t.call('GET', '/nope');
      assert.equal(res.statusCode, 404);
      const body = res.json<{ error: { code: string; requestId: string } }>();
      assert.equal(body.error.code, 'NOT_FOUND');
      assert.equal(body.error.requestId, res.headers['x-request-id']);
    });

    test('DESIGN §3: X-Request-Id is kept when well-formed and replaced when not', async () => {
      const kept = await t.call('GET', '/healthz', { headers: { 'x-request-id': 'client-abc-123' } });
      assert.equal(kept.headers['x-request-id'], 'client-abc-123');
      const replaced = await t.call('GET', '/healthz', { headers: { 'x-request-id': 'bad id with spaces' } });
      assert.match(String(replaced.headers['x-request-id']), /^req_/);
    });

    test('DESIGN §3: invalid JSON → 400 VALIDATION_ERROR', async () => {
      const res = await t.call('POST', '/api/accounts', { user: 'u-json', body: '{"name":', headers: { 'content-type': 'application/json' } });
      assert.equal(res.statusCode, 400);
      assert.equal(codeOf(res), 'VALIDATION_ERROR');
    });

    test('DESIGN §3: a body above MAX_BODY_BYTES → 413 PAYLOAD_TOO_LARGE', async () => {
      const payload = JSON.stringify({ name: 'x'.repeat(t.deps.config.maxBodyBytes) });
      const res = await t.call('POST', '/api/accounts', { user: 'u-big', body: payload, headers: { 'content-type': 'application/json' } });
      assert.equal(res.statusCode, 413);
      assert.equal(codeOf(res), 'PAYLOAD_TOO_LARGE');
    });

    test('DESIGN §7: the body cap is never below what 4 maximal images and 50,000 characters need', async () => {
      assert.ok(t.deps.config.maxBodyBytes >= BODY_CAP_FLOOR);
      await assert.rejects(buildTestApp({ env: { MAX_BODY_BYTES: String(BODY_CAP_FLOOR - 1) } }), /MAX_BODY_BYTES/);
    });
  });

  describe('operations', () => {
    test('DESIGN §10: /healthz, /readyz, /metrics answer without a token', async () => {
      assert.deepEqual((await t.call('GET', '/healthz')).json(), { status: 'ok' });
      assert.deepEqual((await t.call('GET', '/readyz')).json(), { status: 'ready' });
      const metrics = await t.call('GET', '/metrics');
      assert.equal(metrics.statusCode, 200);
      assert.match(metrics.body, /http_requests_total/);
    });

    test('DESIGN §10: without METRICS_TOKEN, /metrics answers loopback clients only (another address, or a relayed request → 404 NOT_FOUND)', async () => {
      const get = (remoteAddress: string, headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url: '/metrics', remoteAddress, headers });
      for (const address of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) assert.equal((await get(address)).statusCode, 200, address);
      for (const [address, headers] of [
        ['203.0.113.7', {}],
        ['10.0.0.2', { authorization: 'Bearer anything-at-all-0123456789' }],
        ['127.0.0.1', { 'x-forwarded-for': '203.0.113.7' }],
        ['127.0.0.1', { forwarded: 'for=203.0.113.7' }],
      ] as const) {
        const res = await get(address, headers);
        assert.equal(res.statusCode, 404, `${address} ${JSON.stringify(headers)}`);
        assert.equal(JSON.parse(res.body).error.code, 'NOT_FOUND');
        assert.doesNotMatch(res.body, /credits|http_requests_total/);
      }
    });

    test('DESIGN §10: with METRICS_TOKEN, /metrics answers only that bearer token, from any address (else 401 UNAUTHENTICATED)', async () => {
      const token = 'metrics-token-0123456789abcdef';
      const other = await buildTestApp({ shareWith: t, env: { METRICS_TOKEN: token } });
      try {
        const get = (remoteAddress: string, authorization?: string) =>
          other.app.inject({ method: 'GET', url: '/metrics', remoteAddress, headers: authorization ? { authorization } : {} });
        for (const address of ['203.0.113.7', '127.0.0.1']) {
          const ok = await get(address, `Bearer ${token}`);
          assert.equal(ok.statusCode, 200, address);
          assert.match(ok.body, /http_requests_total/);
          for (const authorization of [undefined, `Bearer ${token}x`, `Basic ${token}`, 'Bearer ']) {
            const res = await get(address, authorization);
            assert.equal(res.statusCode, 401, `${address} ${String(authorization)}`);
            assert.equal(JSON.parse(res.body).error.code, 'UNAUTHENTICATED');
          }
        }
      } finally {
        await other.close();
      }
      await assert.rejects(buildTestApp({ env: { METRICS_TOKEN: 'short' } }), /METRICS_TOKEN/);
    });

    test('DESIGN §10: /openapi.json is OpenAPI 3.1 and every operation documents its error envelope', async () => {
      const doc = (await t.call('GET', '/openapi.json')).json<OpenApi & { openapi: string }>();
      assert.match(doc.openapi, /^3\.1/);
      for (const [p, methods] of Object.entries(doc.paths)) {
        for (const [m, op] of Object.entries(methods)) {
          if (p === '/metrics') continue;
          assert.ok(op.responses && Object.keys(op.responses).some((k) => k.startsWith('4')), `${m} ${p} documents no error`);
        }
      }
      assert.equal((await t.call('GET', '/docs')).statusCode < 400, true);
    });

    test('DESIGN §10: while draining, /readyz → 503 SERVICE_UNAVAILABLE', async () => {
      const other = await buildTestApp();
      try {
        await other.deps.lifecycle.drain(0);
        const res = await other.call('GET', '/readyz');
        assert.equal(res.statusCode, 503);
        assert.equal(codeOf(res), 'SERVICE_UNAVAILABLE');
        assert.equal((await other.call('GET', '/healthz')).statusCode, 200);
      } finally {
        await other.close();
      }
    });

    test('DESIGN §1: a bad configuration value stops the start with a message naming it', async () => {
      await assert.rejects(buildTestApp({ env: { PORT: 'eighty' } }), /PORT/);
      await assert.rejects(buildTestApp({ env: { MARKET_DATA_PROVIDER: 'bloomberg' } }), /MARKET_DATA_PROVIDER/);
      await assert.rejects(buildTestApp({ env: { CREDIT_PACKS: '[{"packId":"x"}]' } }), /CREDIT_PACKS/);
    });
  });
});
