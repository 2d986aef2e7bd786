import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PROVIDERS, type Provider } from '../../catalogue.ts';
import type { ProbeBehaviour } from '../../../test/fakes/index.ts';
import { codeOf } from '../../../test/helpers/app.ts';
import { FAKE_DEFAULT_MODEL, newUser, useProviderKeysApp, type ProviderKeyItem, usableKey } from '../../../test/kits/advisor-keys.ts';

type Item = ProviderKeyItem;

const VERIFIED_DEFAULT = FAKE_DEFAULT_MODEL;

describe('provider keys (spec 4.2, DESIGN §6)', () => {
  const k = useProviderKeysApp();
  const { clock, put, list, valid } = k;
  const firstConfigured = (p: Provider) => k.t.deps.config.catalogue.providerDefaults[p]?.[0];

  describe('every provider flavour', () => {
    for (const p of PROVIDERS) {
      test(`spec 4.2 rule 4: ${p} valid key → 200 verified true, active, deterministic default model`, async () => {
        const user = newUser();
        const res = await put(user, p, { apiKey: `  ${valid(p)}\n` });
        assert.equal(res.statusCode, 200, res.body);
        const saved = res.json<Item>();
        assert.deepEqual(saved, {
          provider: p,
          keyHintTail: valid(p).slice(-4),
          defaultModel: VERIFIED_DEFAULT[p],
          active: true,
          verified: true,
          lastVerifiedAt: clock.now().toISOString(),
          rejectedAt: null,
          rejectedReason: null,
          createdAt: clock.now().toISOString(),
          updatedAt: clock.now().toISOString(),
        });
        assert.deepEqual(await list(user), [saved]);
        const usable = await usableKey(k.t.deps, user);
        assert.deepEqual(usable, { provider: p, model: VERIFIED_DEFAULT[p], apiKey: valid(p), version: usable.version });
        assert.equal(usable.version.length, 12, 'the sealing nonce names the stored key');
      });

      test(`spec 4.2 rule 3: ${p} rejects an unknown key (its own way) → 400 PROVIDER_KEY_INVALID, nothing stored`, async () => {
        const user = newUser();
        const res = await put(user, p, { apiKey: 'wrong-key-0123456789' });
        assert.equal(res.statusCode, 400, res.body);
        assert.equal(codeOf(res), 'PROVIDER_KEY_INVALID');
        assert.deepEqual(await list(user), []);
      });

      for (const [behaviour, status] of [
        ['unauthorized', 401],
        ['forbidden', 403],
      ] as const) {
        test(`spec 4.2 rule 3: ${p} answers ${status} → 400 PROVIDER_KEY_INVALID, nothing stored`, async () => {
          const user = newUser();
          k.fakes.providers[p].setProbe(behaviour);
          const res = await put(user, p, { apiKey: valid(p) });
          assert.equal(res.statusCode, 400, res.body);
          assert.equal(codeOf(res), 'PROVIDER_KEY_INVALID');
          assert.deepEqual(await list(user), []);
        });
      }

      const transient: [ProbeBehaviour, string][] = [
        ['rate-limited', '429'],
        ['server-error', '5xx'],
        ['stall', 'a stall past the timeout'],
      ];
      // Google and xAI refuse a bad key with 400; for the others a 400 says nothing about the key.
      if (p !== 'google' && p !== 'xai') transient.push(['bad-key-400', 'a 400 that is not its bad-key answer']);
      for (const [behaviour, what] of transient) {
        test(`spec 4.2 rule 5: ${p} probe ${what} → 200 stored with verified false and the configured default model`, async () => {
          const user = newUser();
          k.fakes.providers[p].setProbe(behaviour);
          // A stalled fake never answers: only an app with the stalled deadline ends the probe quickly.
          const app = behaviour === 'stall' ? await k.stalled() : k.t;
          const res = await app.call('PUT', `/api/advisor/provider-keys/${p}`, { user, body: { apiKey: valid(p) } });
          assert.equal(res.statusCode, 200, res.body);
          const saved = res.json<Item>();
          assert.equal(saved.verified, false);
          assert.equal(saved.lastVerifiedAt, null);
          assert.equal(saved.active, true);
          assert.equal(saved.defaultModel, firstConfigured(p));
          assert.equal((await list(user)).length, 1);
        });
      }
    }

    for (const p of ['google', 'xai'] as const) {
      test(`DESIGN §6: ${p} answers its bad-key 400 → 400 PROVIDER_KEY_INVALID, nothing stored`, async () => {
        const user = newUser();
        k.fakes.providers[p].setProbe('bad-key-400');
        const res = await put(user, p, { apiKey: valid(p) });
        assert.equal(res.statusCode, 400, res.body);
        assert.equal(codeOf(res), 'PROVIDER_KEY_INVALID');
        assert.deepEqual(await list(user), []);
      });
    }

    test('spec 4.2 rule 2: each probe speaks its provider protocol', async () => {
      const user = newUser();
      const seen = Object.fromEntries(PROVIDERS.map((p) => [p, k.fakes.providers[p].requests.length]));
      for (const p of PROVIDERS) assert.equal((await put(user, p, { apiKey: valid(p) })).statusCode, 200);
      const first = (p: Provider) => k.fakes.providers[p].requests.slice(seen[p])[0];
      for (const p of ['openai', 'mistral', 'xai', 'groq', 'deepseek'] as const) {
        assert.equal(first(p)?.path, '/v1/models', p);
        assert.equal(first(p)?.headers['authorization'], `Bearer ${valid(p)}`);
      }
      const a = first('anthropic');
      assert.equal(a?.path, '/v1/models');
      assert.deepEqual([a?.headers['x-api-key'], a?.headers['anthropic-version'], a?.query['limit']], [valid('anthropic'), '2023-06-01', '1000']);
      const g = first('google');
      assert.equal(g?.path, '/v1beta/models');
      assert.deepEqual([g?.headers['x-goog-api-key'], g?.query['key'], g?.query['pageSize']], [valid('google'), undefined, '1000']);
      const or = k.fakes.providers.openrouter.requests.slice(seen['openrouter']);
      assert.deepEqual(
        or.map((r) => r.path),
        ['/api/v1/key', '/api/v1/models'],
      );
      assert.equal(or[0]?.headers['authorization'], `Bearer ${valid('openrouter')}`);
      assert.equal(or[1]?.headers['authorization'], undefined, 'the public model list is read without the key');
    });

    test('DESIGN §6: OpenRouter with an empty public model list → verified, default model from config', async () => {
      const fake = k.fakes.providers.openrouter;
      fake.setModels([]);
      const res = await put(newUser(), 'openrouter', { apiKey: valid('openrouter') });
      fake.setModels(['openai/gpt-4o-mini', 'anthropic/claude-3.5-haiku', 'google/gemini-2.5-flash']);
      assert.equal(res.statusCode, 200);
      assert.deepEqual([res.json<Item>().verified, res.json<Item>().defaultModel], [true, firstConfigured('openrouter')]);
    });
  });

  describe('default model', () => {
    test('spec 4.2 rule 6: the same models in any order give the same default (preference and fallback)', async () => {
      const fake = k.fakes.providers.openai;
      const withPreference = ['o3', 'gpt-4.1-mini', 'text-embedding-3-large', 'gpt-4o', 'whisper-1', 'gpt-5-mini'];
      const fallback = ['tts-1', 'gpt-4o-realtime-preview', 'o4-mini', 'dall-e-3', 'omni-moderation-latest', 'chatgpt-4o-latest', 'babbage-002'];
      for (const [models, expected] of [
        [withPreference, 'gpt-4.1-mini'],
        [fallback, 'o4-mini'],
      ] as const) {
        const defaults = new Set<string>();
        for (let i = 0; i < 6; i++) {
          fake.setModels(shuffled(models, i));
          const res = await put(newUser(), 'openai', { apiKey: valid('openai') });
          defaults.add(res.json<Item>().defaultModel);
        }
        assert.deepEqual([...defaults], [expected]);
      }
      fake.setModels(['gpt-4o-mini', 'gpt-4.1-mini', 'gpt-4o', 'text-embedding-3-small', 'dall-e-3']);
    });

    test('spec 4.2: a defaultModel the probe lists is kept as given', async () => {
      const res = await put(newUser(), 'openai', { apiKey: valid('openai'), defaultModel: 'gpt-4o' });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json<Item>().defaultModel, 'gpt-4o');
      const alias = await put(newUser(), 'anthropic', { apiKey: valid('anthropic'), defaultModel: 'claude-sonnet-4-5' });
      assert.equal(alias.json<Item>().defaultModel, 'claude-sonnet-4-5', 'an alias of a listed dated snapshot');
    });

    test('DESIGN §6: a defaultModel absent from a successful probe → 400 VALIDATION_ERROR, nothing stored', async () => {
      const user = newUser();
      const res = await put(user, 'openai', { apiKey: valid('openai'), defaultModel: 'gpt-nonexistent' });
      assert.equal(res.statusCode, 400);
      assert.equal(codeOf(res), 'VALIDATION_ERROR');
      assert.deepEqual(await list(user), []);
    });

    test('DESIGN §6: after a transient probe a defaultModel is accepted as given', async () => {
      k.fakes.providers.openai.setProbe('server-error');
      const res = await put(newUser(), 'openai', { apiKey: valid('openai'), defaultModel: 'gpt-nonexistent' });
      assert.equal(res.statusCode, 200);
      assert.deepEqual([res.json<Item>().verified, res.json<Item>().defaultModel], [false, 'gpt-nonexistent']);
    });
  });
});

/** A deterministic permutation per seed (no flaky randomness, still several orders). */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed * 7919 + 17;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 48271) % 2147483647;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return seed === 0 ? out.reverse() : out;
}
