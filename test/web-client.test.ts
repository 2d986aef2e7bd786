// Issue 18 on the server side: how the web client is served (CSP, caching, compression, its budget),
// the local sign-in and where it is off, and the two routes the client's pickers read.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { TEST_ENCRYPTION_KEYS, TEST_JWT_SECRET, buildTestApp, codeOf, type TestApp } from './helpers/app.ts';
import Fastify from 'fastify';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { CLIENT_PATHS, CONTENT_SECURITY_POLICY, WEB_DIST, webClientRoutes } from '../src/http/web-client.ts';
import { ConfigError, loadConfig } from '../src/config.ts';

const ASSETS = path.join(WEB_DIST, 'assets');
const built = (() => {
  try {
    return statSync(path.join(WEB_DIST, 'index.html')).isFile();
  } catch {
    return false;
  }
})();

describe('web client: serving', () => {
  let t: TestApp;
  before(async () => {
    assert.ok(built, 'web/dist is built by `npm ci` (prepare) or `npm run build:web`');
    t = await buildTestApp();
  });
  after(async () => {
    await t.close();
  });

  test('issue 18: every client path answers the page, never cached, with the strict CSP', async () => {
    for (const route of CLIENT_PATHS) {
      const url = route.replace(':id', '0190c7e2-0000-7000-8000-000000000000');
      const res = await t.call('GET', url);
      assert.equal(res.statusCode, 200, url);
      assert.match(String(res.headers['content-type']), /^text\/html/);
      assert.equal(res.headers['content-security-policy'], CONTENT_SECURITY_POLICY);
      assert.equal(res.headers['cache-control'], 'no-cache');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
    }
    assert.match(CONTENT_SECURITY_POLICY, /default-src 'none'/);
    assert.doesNotMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval/);
    // The built page itself holds no inline script (the CSP would refuse it).
    const html = readFileSync(path.join(WEB_DIST, 'index.html'), 'utf8');
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/);
  });

  test('issue 18: hashed assets are cached a year (immutable) and sent brotli or gzip to clients that take them', async () => {
    const entry = /src="(\/assets\/index-[\w-]+\.js)"/.exec(readFileSync(path.join(WEB_DIST, 'index.html'), 'utf8'))?.[1];
    assert.ok(entry);
    const br = await t.call('GET', entry, { headers: { 'accept-encoding': 'br, gzip' } });
    assert.equal(br.statusCode, 200);
    assert.equal(br.headers['content-encoding'], 'br');
    assert.match(String(br.headers['cache-control']), /max-age=31536000/);
    assert.match(String(br.headers['cache-control']), /immutable/);
    const gz = await t.call('GET', entry, { headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    const plain = await t.call('GET', entry);
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.match(String(plain.headers['content-type']), /javascript/);
    const missing = await t.call('GET', '/assets/nope-123.js');
    assert.equal(missing.statusCode, 404);
  });

  test('issue 18 budget: the JavaScript of the chat page, the lazily loaded chart included, is at most 200 KB gzipped', () => {
    const js = readdirSync(ASSETS).filter((f) => f.endsWith('.js'));
    const gz = js.reduce((sum, f) => sum + gzipSync(readFileSync(path.join(ASSETS, f)), { level: 9 }).length, 0);
    assert.ok(js.length >= 2, 'an entry and the chart chunk');
    assert.ok(gz <= 200 * 1000, `${gz} bytes gzipped`);
  });

  test('issue 18: without a built client (a production install without dev dependencies) / answers 503 with the command that builds it', async () => {
    const empty = mkdtempSync(path.join(os.tmpdir(), 'advisor-no-web-'));
    const bare = Fastify();
    try {
      await bare.register(webClientRoutes, { dist: empty });
      const res = await bare.inject({ method: 'GET', url: '/' });
      assert.equal(res.statusCode, 503);
      assert.match(res.body, /npm run build:web/);
      assert.equal(res.headers['content-security-policy'], CONTENT_SECURITY_POLICY);
      assert.equal((await bare.inject({ method: 'GET', url: '/assets/index.js' })).statusCode, 404);
    } finally {
      await bare.close();
      rmSync(empty, { recursive: true, force: true });
    }
  });

  test('issue 18: the OpenAPI document still lists only the API (client pages and assets are hidden)', async () => {
    const doc = (await t.call('GET', '/openapi.json')).json<{ paths: Record<string, unknown> }>();
    for (const p of Object.keys(doc.paths)) assert.ok(p.startsWith('/api/') || ['/healthz', '/readyz', '/metrics'].includes(p), p);
  });
});

describe('web client: local sign-in (DESIGN §2)', () => {
  test('issue 18: on the embedded default on loopback any user id gets a token that the API accepts; an empty id → 400 VALIDATION_ERROR', async () => {
    const t = await buildTestApp({ env: { AUTH_JWT_SECRET: undefined, DATABASE_URL: undefined, REDIS_URL: undefined } });
    try {
      assert.equal(t.deps.config.localSignIn, true);
      const offered = await t.call('GET', '/api/local-sign-in');
      assert.equal(offered.statusCode, 200);
      assert.deepEqual(offered.json(), { available: true });
      const res = await t.call('POST', '/api/local-sign-in', { body: { userId: ' trader-1 ' } });
      assert.equal(res.statusCode, 200);
      const s = res.json<{ token: string; userId: string; expiresAt: string }>();
      assert.equal(s.userId, 'trader-1');
      assert.ok(Date.parse(s.expiresAt) > Date.now() + 11 * 3600_000);
      const accounts = await t.call('GET', '/api/accounts', { headers: { authorization: `Bearer ${s.token}` } });
      assert.equal(accounts.statusCode, 200);
      for (const userId of ['', '   ', 'x'.repeat(129)]) {
        const bad = await t.call('POST', '/api/local-sign-in', { body: { userId } });
        assert.equal(bad.statusCode, 400, JSON.stringify(userId));
        assert.equal(codeOf(bad), 'VALIDATION_ERROR');
      }
    } finally {
      await t.close();
    }
  });

  test('issue 18: off everywhere else — a configured JWT secret, a database URL, a JWKS, or a non-loopback HOST → 404 NOT_FOUND', async () => {
    const base = { DATA_DIR: '/tmp/advisor-config-only' };
    assert.equal(loadConfig({ ...base }).localSignIn, true);
    assert.equal(loadConfig({ ...base, HOST: 'localhost' }).localSignIn, true);
    assert.equal(loadConfig({ ...base, HOST: '::1' }).localSignIn, true);
    assert.equal(loadConfig({ ...base, AUTH_JWT_SECRET: 'x'.repeat(32) }).localSignIn, false);
    // With a database URL the shared secrets are required too (DESIGN §10).
    assert.equal(
      loadConfig({ ...base, DATABASE_URL: 'postgres://u@127.0.0.1/db', ENCRYPTION_KEYS: TEST_ENCRYPTION_KEYS, AUTH_JWT_SECRET: TEST_JWT_SECRET }).localSignIn,
      false,
    );
    assert.equal(loadConfig({ ...base, HOST: '0.0.0.0' }).localSignIn, false);
    assert.equal(loadConfig({ ...base, HOST: '10.0.0.5' }).localSignIn, false);
    assert.equal(loadConfig({ ...base, AUTH_JWKS_URL: 'https://id.example/jwks', AUTH_ISSUER: 'i', AUTH_AUDIENCE: 'a' }).localSignIn, false);
    const t = await buildTestApp();
    try {
      for (const method of ['GET', 'POST'] as const) {
        const res = await t.call(method, '/api/local-sign-in', method === 'POST' ? { body: { userId: 'mallory' } } : {});
        assert.equal(res.statusCode, 404, method);
        assert.equal(codeOf(res), 'NOT_FOUND');
      }
    } finally {
      await t.close();
    }
  });

  test('issue 18: the checkout returns to the client this process serves unless the operator names a front end', () => {
    const c = loadConfig({ DATA_DIR: '/tmp/advisor-config-only', PORT: '4100' });
    assert.equal(c.checkoutSuccessUrl, 'http://localhost:4100/billing/success?session_id={CHECKOUT_SESSION_ID}');
    assert.equal(c.checkoutCancelUrl, 'http://localhost:4100/billing/cancel');
    const named = loadConfig({
      DATA_DIR: '/tmp/advisor-config-only',
      CHECKOUT_SUCCESS_URL: 'https://journal.example/ok',
      CHECKOUT_CANCEL_URL: 'https://journal.example/no',
    });
    assert.equal(named.checkoutSuccessUrl, 'https://journal.example/ok');
  });

  test('issue 29: the origins a checkout may return to — the checkout URLs’ own, a loopback listener’s three names, and ALLOWED_ORIGINS; anything but a bare origin stops the start', () => {
    const local = loadConfig({ DATA_DIR: '/tmp/advisor-config-only', PORT: '4100' });
    assert.deepEqual(local.allowedOrigins, ['http://localhost:4100', 'http://127.0.0.1:4100', 'http://[::1]:4100']);
    const hosted = loadConfig({
      DATA_DIR: '/tmp/advisor-config-only',
      HOST: '0.0.0.0',
      CHECKOUT_SUCCESS_URL: 'https://advisor.example/billing/success',
      ALLOWED_ORIGINS: 'https://Journal.example:443, http://10.0.0.5:3000/',
    });
    assert.deepEqual(hosted.allowedOrigins, ['https://advisor.example', 'http://localhost:3000', 'https://journal.example', 'http://10.0.0.5:3000']);
    for (const bad of ['https://journal.example/app', 'journal.example', 'ftp://journal.example', 'https://journal.example?x=1']) {
      assert.throws(
        () => loadConfig({ DATA_DIR: '/tmp/advisor-config-only', ALLOWED_ORIGINS: bad }),
        (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.startsWith('ALLOWED_ORIGINS')),
        bad,
      );
    }
  });
});

describe('web client: what the pickers read', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp();
  });
  after(async () => {
    await t.close();
  });

  test('issue 18: GET /api/timezones lists canonical IANA names (Asia/Kolkata, not the link Asia/Calcutta), sorted, each accepted by account create; and every link with the zone it is stored as', async () => {
    const res = await t.call('GET', '/api/timezones', { user: 'tz-user' });
    assert.equal(res.statusCode, 200);
    const { version, timezones, links } = res.json<{ version: string; timezones: string[]; links: Record<string, string> }>();
    assert.equal(links['Asia/Calcutta'], 'Asia/Kolkata');
    assert.equal(links['US/Eastern'], 'America/New_York');
    assert.equal(links['UTC'], 'Etc/UTC');
    for (const [link, zone] of Object.entries(links)) {
      assert.ok(!timezones.includes(link), `${link} is listed as canonical`);
      assert.ok(timezones.includes(zone), `${link} → ${zone}, not a listed zone`);
    }
    for (const [link, zone] of Object.entries(links).filter((_, i) => i % 50 === 0)) {
      const created = await t.call('POST', '/api/accounts', {
        user: 'tz-user',
        body: { name: `L ${link}`, currency: 'USD', timezone: link, startingBalance: '0' },
      });
      assert.equal(created.statusCode, 201, link);
      assert.equal(created.json<{ timezone: string }>().timezone, zone, link);
    }
    assert.match(version, /^\d{4}[a-z]$/);
    assert.ok(timezones.includes('Asia/Kolkata') && timezones.includes('America/New_York') && timezones.includes('Etc/UTC'));
    assert.ok(!timezones.includes('Asia/Calcutta') && !timezones.includes('US/Eastern'));
    assert.deepEqual([...timezones].sort(), timezones);
    for (const timezone of timezones.filter((_, i) => i % 40 === 0)) {
      const created = await t.call('POST', '/api/accounts', {
        user: 'tz-user',
        body: { name: `A ${timezone}`, currency: 'USD', timezone, startingBalance: '0' },
      });
      assert.equal(created.statusCode, 201, timezone);
      assert.equal(created.json<{ timezone: string }>().timezone, timezone);
    }
    const anonymous = await t.call('GET', '/api/timezones');
    assert.deepEqual([anonymous.statusCode, codeOf(anonymous)], [401, 'UNAUTHENTICATED']);
  });

  test('issue 18: GET /api/advisor/catalogue names personas (not their prompts), suggested models, how each model is paid, and the message limits', async () => {
    const res = await t.call('GET', '/api/advisor/catalogue', { user: 'cat-user' });
    assert.equal(res.statusCode, 200);
    const c = res.json<{
      limits: { maxTextChars: number; maxImagesPerMessage: number; maxImageBytes: number };
      personas: Record<string, unknown>[];
      providers: { provider: string; suggestedModels: string[] }[];
      models: { provider: string; match: string; allowance: boolean; images: boolean; tools: boolean }[];
    }>();
    assert.deepEqual(c.limits, { maxTextChars: 50_000, maxImagesPerMessage: 4, maxImageBytes: t.deps.config.maxImageBytes });
    assert.deepEqual(
      c.personas.map((p) => Object.keys(p).sort()),
      t.deps.config.catalogue.personas.map(() => ['name', 'personaId']),
    );
    assert.ok(!res.body.includes(t.deps.config.catalogue.personas[0]?.systemPrompt ?? '∅'));
    assert.deepEqual(c.providers.find((p) => p.provider === 'openai')?.suggestedModels, t.deps.config.catalogue.providerDefaults.openai);
    assert.equal(c.models.length, t.deps.config.catalogue.models.length);
    assert.ok(c.models.some((m) => m.allowance) && c.models.some((m) => !m.allowance));
    assert.equal(
      res.json<{ marketDataProvider: string }>().marketDataProvider,
      'polygon',
      'issue 29: the market-data provider a key is for, named before any key is saved',
    );
    const anonymous = await t.call('GET', '/api/advisor/catalogue');
    assert.deepEqual([anonymous.statusCode, codeOf(anonymous)], [401, 'UNAUTHENTICATED']);
  });
});
