import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildTestApp, codeOf, STORES, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { newUser, startKeyFakes, type KeyFakes } from '../../../test/kits/advisor-keys.ts';

const PROVIDER_URL = '/api/advisor/provider-keys/openai';
const MARKET_URL = '/api/advisor/market-data-key';

describe('key save limits (spec 4.1 rule 6, 4.2 rule 7, DESIGN §4)', () => {
  let fakes: KeyFakes;
  before(async () => {
    fakes = await startKeyFakes();
  });
  after(async () => fakes.close());
  beforeEach(() => fakes.reset());

  // The store the limiter runs on: in-process (one instance), and when configured PostgreSQL and
  // Redis, each shared by two instances.
  const stores: { name: string; env: Record<string, string | undefined>; instances: 1 | 2 }[] = [
    { name: 'memory', env: { DATABASE_URL: undefined, REDIS_URL: undefined }, instances: 1 },
  ];
  if (STORES.databaseUrl) stores.push({ name: 'PostgreSQL', env: { REDIS_URL: undefined }, instances: 2 });
  if (STORES.redisUrl) stores.push({ name: 'Redis', env: {}, instances: 2 });

  for (const store of stores) {
    for (const [rule, url, body] of [
      ['spec 4.2 rule 7', PROVIDER_URL, () => ({ apiKey: fakes.providers.openai.validKey })],
      ['spec 4.1 rule 6', MARKET_URL, () => ({ apiKey: fakes.polygon.validKey })],
    ] as const) {
      test(`${rule}: 200 concurrent saves for one user on ${store.name} (${store.instances} instance(s)) → exactly 10 admitted`, async () => {
        const a = await buildTestApp({ env: fakes.env(store.env) });
        const b = store.instances === 2 ? await buildTestApp({ env: fakes.env(store.env), shareWith: a }) : a;
        try {
          const user = newUser();
          const fake = url === PROVIDER_URL ? fakes.providers.openai : fakes.polygon;
          const before = fake.requests.length;
          const results = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).call('PUT', url, { user, body: body() })));
          const admitted = results.filter((r) => r.statusCode === 200);
          const refused = results.filter((r) => r.statusCode === 429);
          assert.equal(admitted.length, 10);
          assert.equal(refused.length, 190);
          assert.ok(refused.every((r) => codeOf(r) === 'RATE_LIMITED' && r.headers['retry-after'] !== undefined));
          // Each admitted save's probe reached the fake and was answered (a probe cut by its deadline
          // would store the key unverified and might never reach the fake), so the fake's count is
          // the admitted saves' probes alone.
          assert.ok(
            admitted.every((r) => r.json<{ verified: boolean }>().verified),
            'every admitted save was verified by its probe',
          );
          assert.equal(fake.requests.length - before, 10, 'a refused save calls no provider');
        } finally {
          if (b !== a) await b.close();
          await a.close();
        }
      });
    }
  }

  describe('rolling window', () => {
    let t: TestApp;
    const clock = new ManualClock(new Date('2030-03-01T00:00:00Z'));
    before(async () => {
      t = await buildTestApp({ clock, env: fakes.env() });
    });
    after(async () => t.close());

    test('spec 4.2 rule 7: 10 attempts of any outcome at t; the 11th at t+3599 s → 429 with Retry-After and RateLimit headers; at t+3600 s admitted', async () => {
      const start = clock.now().getTime();
      const user = newUser();
      const attempts: [string, unknown][] = [
        ['openai', { apiKey: fakes.providers.openai.validKey }],
        ['anthropic', { apiKey: fakes.providers.anthropic.validKey }],
        ['google', { apiKey: 'AIza-not-a-valid-key' }],
        ['xai', { apiKey: 'short' }],
        ['groq', { extra: true }],
        ['cohere', { apiKey: 'sk-unknown-provider' }],
      ];
      const expected = [200, 200, 400, 400, 400, 400, 200, 200, 200, 200];
      for (let i = 0; i < 10; i++) {
        const [provider, body] = attempts[i] ?? ['deepseek', { apiKey: fakes.providers.deepseek.validKey }];
        const res = await t.call('PUT', `/api/advisor/provider-keys/${provider}`, { user, body });
        assert.equal(res.statusCode, expected[i], `attempt ${i + 1}: ${res.body}`);
        assert.equal(res.headers['ratelimit-policy'], '"provider-key-saves";q=10;w=3600');
      }
      clock.set(new Date(start + 3_599_000));
      const before = fakes.providers.mistral.requests.length;
      const refused = await t.call('PUT', '/api/advisor/provider-keys/mistral', { user, body: { apiKey: fakes.providers.mistral.validKey } });
      assert.equal(refused.statusCode, 429);
      assert.equal(codeOf(refused), 'RATE_LIMITED');
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(refused.headers['ratelimit-policy'], '"provider-key-saves";q=10;w=3600');
      assert.equal(refused.headers['ratelimit'], '"provider-key-saves";r=0;t=1');
      assert.equal(fakes.providers.mistral.requests.length, before, 'a refused save makes no request to the provider');
      // The market-data rule is separate.
      assert.equal((await t.call('PUT', MARKET_URL, { user, body: { apiKey: fakes.polygon.validKey } })).statusCode, 200);
      clock.set(new Date(start + 3_600_000));
      const admitted = await t.call('PUT', '/api/advisor/provider-keys/mistral', { user, body: { apiKey: fakes.providers.mistral.validKey } });
      assert.equal(admitted.statusCode, 200, admitted.body);
      // Every earlier hit has left the window; the refused one was never recorded.
      assert.equal(admitted.headers['ratelimit'], '"provider-key-saves";r=9;t=3600');
    });

    test('spec 4.1 rule 6: 10 market-data attempts at t; the 11th at t+3599 s → 429; at t+3600 s admitted', async () => {
      const start = clock.now().getTime();
      const user = newUser();
      for (let i = 0; i < 10; i++) {
        const body = i % 3 === 0 ? { apiKey: 'rejected-by-polygon' } : i % 3 === 1 ? { apiKey: 1 } : { apiKey: fakes.polygon.validKey };
        const res = await t.call('PUT', MARKET_URL, { user, body });
        assert.notEqual(res.statusCode, 429);
      }
      clock.set(new Date(start + 3_599_000));
      const before = fakes.polygon.requests.length;
      const refused = await t.call('PUT', MARKET_URL, { user, body: { apiKey: fakes.polygon.validKey } });
      assert.equal(refused.statusCode, 429);
      assert.equal(codeOf(refused), 'RATE_LIMITED');
      assert.equal(refused.headers['retry-after'], '1');
      assert.match(String(refused.headers['ratelimit']), /^"market-data-key-saves";r=0;t=\d+$/);
      assert.equal(fakes.polygon.requests.length, before);
      clock.set(new Date(start + 3_600_000));
      const admitted = await t.call('PUT', MARKET_URL, { user, body: { apiKey: fakes.polygon.validKey } });
      assert.equal(admitted.statusCode, 200);
      // Had the 429 counted, only 8 would remain.
      assert.equal(admitted.headers['ratelimit'], '"market-data-key-saves";r=9;t=3600');
    });

    test('DESIGN §4: limits are per user', async () => {
      const [busy, idle] = [newUser(), newUser()];
      for (let i = 0; i < 10; i++) await t.call('PUT', PROVIDER_URL, { user: busy, body: { apiKey: 'short' } });
      assert.equal((await t.call('PUT', PROVIDER_URL, { user: busy, body: { apiKey: 'short' } })).statusCode, 429);
      assert.equal((await t.call('PUT', PROVIDER_URL, { user: idle, body: { apiKey: fakes.providers.openai.validKey } })).statusCode, 200);
    });

    test('DESIGN §4: reads, PATCH and DELETE are not limited', async () => {
      const user = newUser();
      for (let i = 0; i < 10; i++) await t.call('PUT', PROVIDER_URL, { user, body: { apiKey: fakes.providers.openai.validKey } });
      for (let i = 0; i < 12; i++) {
        assert.equal((await t.call('GET', '/api/advisor/provider-keys', { user })).statusCode, 200);
        assert.equal((await t.call('PATCH', PROVIDER_URL, { user, body: { active: i % 2 === 0 } })).statusCode, 200);
        assert.equal((await t.call('GET', MARKET_URL, { user })).statusCode, 200);
      }
      assert.equal((await t.call('DELETE', PROVIDER_URL, { user })).statusCode, 204);
    });
  });
});
