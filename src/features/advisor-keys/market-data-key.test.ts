import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { MarketDataFake } from '../../../test/fakes/index.ts';
import { buildTestApp, codeOf, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { newUser, startKeyFakes, type KeyFakes } from '../../../test/kits/advisor-keys.ts';

type Status = {
  configured: boolean;
  keyHintTail: string | null;
  verified: boolean;
  provider: string | null;
  lastVerifiedAt: string | null;
  rejectedAt: string | null;
  rejectedReason: string | null;
  updatedAt: string | null;
};

const URL_ = '/api/advisor/market-data-key';

describe('market-data key (spec 4.1)', () => {
  let fakes: KeyFakes;
  const clock = new ManualClock(new Date('2030-02-01T00:00:00Z'));
  const apps: Record<'polygon' | 'fmp', TestApp> = {} as Record<'polygon' | 'fmp', TestApp>;
  // The same, on the same databases, with the stalled probe deadline: for the tests that stall a fake.
  const stalledApps: Record<'polygon' | 'fmp', TestApp> = {} as Record<'polygon' | 'fmp', TestApp>;
  before(async () => {
    fakes = await startKeyFakes();
    const fmp = { MARKET_DATA_PROVIDER: 'fmp', MARKET_DATA_BASE_URL: fakes.fmp.url };
    apps.polygon = await buildTestApp({ clock, env: fakes.env() });
    apps.fmp = await buildTestApp({ clock, env: fakes.env(fmp) });
    stalledApps.polygon = await buildTestApp({ clock, env: fakes.env({}, 'stalled'), shareWith: apps.polygon });
    stalledApps.fmp = await buildTestApp({ clock, env: fakes.env(fmp, 'stalled'), shareWith: apps.fmp });
  });
  after(async () => {
    await Promise.all(Object.values(stalledApps).map((a) => a.close()));
    await Promise.all(Object.values(apps).map((a) => a.close()));
    await fakes.close();
  });
  beforeEach(() => fakes.reset());

  for (const provider of ['polygon', 'fmp'] as const) {
    describe(provider, () => {
      const t = () => apps[provider];
      const fake = (): MarketDataFake => fakes[provider];
      const put = (user: string, body: unknown) => t().call('PUT', URL_, { user, body });
      const status = async (user: string) => (await t().call('GET', URL_, { user })).json<Status>();

      test(`spec 4.1 rule 4: ${provider} accepts the key → 200 { configured, keyHintTail, verified: true }`, async () => {
        const user = newUser();
        const res = await put(user, { apiKey: fake().validKey });
        assert.equal(res.statusCode, 200, res.body);
        const expected: Status = {
          configured: true,
          keyHintTail: fake().validKey.slice(-4),
          verified: true,
          provider,
          lastVerifiedAt: clock.now().toISOString(),
          rejectedAt: null,
          rejectedReason: null,
          updatedAt: clock.now().toISOString(),
        };
        assert.deepEqual(res.json(), expected);
        assert.deepEqual(await status(user), expected);
      });

      test(`spec 4.1 rule 2: ${provider} probe is the provider's own call`, async () => {
        const from = fake().requests.length;
        await put(newUser(), { apiKey: fake().validKey });
        const [probe] = fake().requests.slice(from);
        if (provider === 'polygon') {
          assert.equal(probe?.path, '/v1/marketstatus/now');
          assert.equal(probe?.headers['authorization'], `Bearer ${fake().validKey}`);
          assert.equal(probe?.query['apiKey'], undefined, 'the key stays out of the URL');
        } else {
          assert.equal(probe?.path, '/stable/quote');
          assert.deepEqual([probe?.query['symbol'], probe?.query['apikey']], ['AAPL', fake().validKey]);
        }
      });

      for (const [name, setup] of [
        ['an unknown key (401)', () => undefined],
        ['401', () => fake().setProbe('unauthorized')],
        ['403', () => fake().setProbe('forbidden')],
      ] as const) {
        test(`spec 4.1 rule 3: ${provider} answers ${name} → 400 MARKET_DATA_KEY_INVALID, nothing stored`, async () => {
          const user = newUser();
          setup();
          const res = await put(user, { apiKey: name.startsWith('an unknown') ? 'unknown-key-123' : fake().validKey });
          assert.equal(res.statusCode, 400, res.body);
          assert.equal(codeOf(res), 'MARKET_DATA_KEY_INVALID');
          assert.equal((await status(user)).configured, false);
        });
      }

      test(`spec 4.1 rule 3: ${provider} refusal leaves an earlier key as it was`, async () => {
        const user = newUser();
        const first = (await put(user, { apiKey: fake().validKey })).json<Status>();
        clock.advance(1000);
        const res = await put(user, { apiKey: 'another-bad-key-9876' });
        assert.equal(codeOf(res), 'MARKET_DATA_KEY_INVALID');
        assert.deepEqual(await status(user), first);
      });

      for (const [behaviour, what] of [
        ['rate-limited', '429'],
        ['server-error', '5xx'],
        ['stall', 'a stall past the timeout'],
      ] as const) {
        test(`spec 4.1 rule 5: ${provider} probe ${what} → 200 stored with verified false`, async () => {
          const user = newUser();
          fake().setProbe(behaviour);
          // A stalled fake never answers: only an app with the stalled deadline ends the probe quickly.
          const app = behaviour === 'stall' ? stalledApps[provider] : t();
          const res = await app.call('PUT', URL_, { user, body: { apiKey: fake().validKey } });
          assert.equal(res.statusCode, 200, res.body);
          assert.deepEqual([res.json<Status>().configured, res.json<Status>().verified, res.json<Status>().lastVerifiedAt], [true, false, null]);
          assert.equal((await status(user)).verified, false);
        });
      }

      test(`spec 4.1 rule 6 / validation: ${provider} invalid body → 400 MARKET_DATA_KEY_INVALID, no probe`, async () => {
        const user = newUser();
        const from = fake().requests.length;
        for (const body of [{}, { apiKey: 7 }, { apiKey: 'short' }, { apiKey: 'a b c d e f g h' }, { apiKey: fake().validKey, provider: 'fmp' }, null]) {
          const res = await put(user, body);
          assert.equal(res.statusCode, 400, JSON.stringify(body));
          assert.equal(codeOf(res), 'MARKET_DATA_KEY_INVALID');
        }
        assert.equal(fake().requests.length, from);
      });
    });
  }

  test('DESIGN §6: GET with no key → 200 configured false; DELETE → 204, then 404 MARKET_DATA_KEY_NOT_FOUND', async () => {
    const t = apps.polygon;
    const user = newUser();
    const none: Status = {
      configured: false,
      keyHintTail: null,
      verified: false,
      provider: null,
      lastVerifiedAt: null,
      rejectedAt: null,
      rejectedReason: null,
      updatedAt: null,
    };
    assert.deepEqual((await t.call('GET', URL_, { user })).json(), none);
    await t.call('PUT', URL_, { user, body: { apiKey: fakes.polygon.validKey } });
    assert.equal((await t.call('DELETE', URL_, { user })).statusCode, 204);
    assert.deepEqual((await t.call('GET', URL_, { user })).json(), none);
    const again = await t.call('DELETE', URL_, { user });
    assert.equal(again.statusCode, 404);
    assert.equal(codeOf(again), 'MARKET_DATA_KEY_NOT_FOUND');
  });

  test("DESIGN §2: another user's market-data key is invisible", async () => {
    const t = apps.polygon;
    const owner = newUser();
    await t.call('PUT', URL_, { user: owner, body: { apiKey: fakes.polygon.validKey } });
    const other = newUser();
    assert.equal((await t.call('GET', URL_, { user: other })).json<Status>().configured, false);
    assert.equal(codeOf(await t.call('DELETE', URL_, { user: other })), 'MARKET_DATA_KEY_NOT_FOUND');
    assert.equal((await t.call('GET', URL_, { user: owner })).json<Status>().configured, true);
  });
});
