import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PROVIDERS } from '../../catalogue.ts';
import { codeOf } from '../../../test/helpers/app.ts';
import { newUser, useProviderKeysApp, type ProviderKeyItem, usableKey } from '../../../test/kits/advisor-keys.ts';

type Item = ProviderKeyItem;

describe('provider keys: active key, PATCH, DELETE, errors (spec 4.2, DESIGN §6)', () => {
  const k = useProviderKeysApp();
  const { clock, put, list, valid } = k;

  describe('active key, PATCH, DELETE', () => {
    test('DESIGN §6: saving a key makes it active and every other key inactive', async () => {
      const user = newUser();
      await put(user, 'openai', { apiKey: valid('openai') });
      clock.advance(1000);
      await put(user, 'anthropic', { apiKey: valid('anthropic') });
      assert.deepEqual(
        (await list(user)).map((i) => [i.provider, i.active]),
        [
          ['anthropic', true],
          ['openai', false],
        ],
      );
      assert.equal((await usableKey(k.t.deps, user)).provider, 'anthropic');
      const openai = await usableKey(k.t.deps, user, 'openai');
      assert.deepEqual(openai, { provider: 'openai', model: 'gpt-4o-mini', apiKey: valid('openai'), version: openai.version });
    });

    test('DESIGN §6: saving again replaces the key, keeps createdAt, and moves the active flag back', async () => {
      const user = newUser();
      const first = (await put(user, 'openai', { apiKey: valid('openai') })).json<Item>();
      await put(user, 'groq', { apiKey: valid('groq') });
      clock.advance(5000);
      k.fakes.providers.openai.addValidKey('sk-second-openai-key');
      const again = (await put(user, 'openai', { apiKey: 'sk-second-openai-key' })).json<Item>();
      assert.equal(again.createdAt, first.createdAt);
      assert.equal(again.updatedAt, clock.now().toISOString());
      assert.equal(again.keyHintTail, '-key');
      assert.deepEqual(
        (await list(user)).map((i) => [i.provider, i.active]),
        [
          ['groq', false],
          ['openai', true],
        ],
      );
      assert.equal((await usableKey(k.t.deps, user)).apiKey, 'sk-second-openai-key');
    });

    test('DESIGN §6: concurrent saves of different providers leave exactly one active key', async () => {
      const user = newUser();
      const results = await Promise.all(PROVIDERS.map((p) => put(user, p, { apiKey: valid(p) })));
      assert.deepEqual(
        results.map((r) => r.statusCode),
        PROVIDERS.map(() => 200),
      );
      const items = await list(user);
      assert.equal(items.length, PROVIDERS.length);
      assert.equal(items.filter((i) => i.active).length, 1);
    });

    test('DESIGN §6: the database refuses a second active key for a user', async () => {
      const user = newUser();
      await put(user, 'openai', { apiKey: valid('openai') });
      await put(user, 'groq', { apiKey: valid('groq') });
      await assert.rejects(
        k.t.deps.db.updateTable('provider_keys').set({ active: true }).where('user_id', '=', user).execute(),
        (err: { code?: string }) => err.code === '23505',
      );
    });

    test('DESIGN §6: PATCH active true moves the flag; active false leaves no active key', async () => {
      const user = newUser();
      await put(user, 'openai', { apiKey: valid('openai') });
      await put(user, 'mistral', { apiKey: valid('mistral') });
      clock.advance(1000);
      const moved = await k.t.call('PATCH', '/api/advisor/provider-keys/openai', { user, body: { active: true } });
      assert.equal(moved.statusCode, 200, moved.body);
      assert.equal(moved.json<Item>().active, true);
      assert.equal(moved.json<Item>().updatedAt, clock.now().toISOString());
      assert.deepEqual(
        (await list(user)).map((i) => [i.provider, i.active]),
        [
          ['mistral', false],
          ['openai', true],
        ],
      );
      const off = await k.t.call('PATCH', '/api/advisor/provider-keys/openai', { user, body: { active: false } });
      assert.equal(off.json<Item>().active, false);
      assert.deepEqual(
        (await list(user)).map((i) => i.active),
        [false, false],
      );
      await assert.rejects(usableKey(k.t.deps, user), { code: 'PROVIDER_KEY_NOT_CONFIGURED', status: 409 });
    });

    test('DESIGN §6: PATCH defaultModel changes only the model', async () => {
      const user = newUser();
      await put(user, 'openai', { apiKey: valid('openai') });
      const res = await k.t.call('PATCH', '/api/advisor/provider-keys/openai', { user, body: { defaultModel: 'gpt-4.1' } });
      assert.equal(res.statusCode, 200);
      assert.deepEqual([res.json<Item>().defaultModel, res.json<Item>().active], ['gpt-4.1', true]);
      assert.equal((await usableKey(k.t.deps, user)).model, 'gpt-4.1');
    });

    test('DESIGN §6: PATCH with no field or an unknown field → 400 VALIDATION_ERROR', async () => {
      const user = newUser();
      await put(user, 'openai', { apiKey: valid('openai') });
      for (const body of [{}, { apiKey: valid('openai') }, { active: 'yes' }, { defaultModel: '' }]) {
        const res = await k.t.call('PATCH', '/api/advisor/provider-keys/openai', { user, body });
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      }
    });

    test('DESIGN §6: DELETE → 204, then 404 PROVIDER_KEY_NOT_FOUND; PATCH of a missing key → 404', async () => {
      const user = newUser();
      await put(user, 'openai', { apiKey: valid('openai') });
      assert.equal((await k.t.call('DELETE', '/api/advisor/provider-keys/openai', { user })).statusCode, 204);
      assert.deepEqual(await list(user), []);
      await assert.rejects(usableKey(k.t.deps, user), { code: 'PROVIDER_KEY_NOT_CONFIGURED' });
      await assert.rejects(usableKey(k.t.deps, user, 'openai'), { code: 'PROVIDER_KEY_NOT_CONFIGURED' });
      for (const [method, body] of [
        ['DELETE', undefined],
        ['PATCH', { active: true }],
      ] as const) {
        const res = await k.t.call(method, '/api/advisor/provider-keys/openai', { user, body });
        assert.equal(res.statusCode, 404);
        assert.equal(codeOf(res), 'PROVIDER_KEY_NOT_FOUND');
      }
    });

    test("DESIGN §2: another user's key is invisible (list, PATCH, DELETE)", async () => {
      const owner = newUser();
      await put(owner, 'openai', { apiKey: valid('openai') });
      const other = newUser();
      assert.deepEqual(await list(other), []);
      assert.equal(codeOf(await k.t.call('PATCH', '/api/advisor/provider-keys/openai', { user: other, body: { active: true } })), 'PROVIDER_KEY_NOT_FOUND');
      assert.equal(codeOf(await k.t.call('DELETE', '/api/advisor/provider-keys/openai', { user: other })), 'PROVIDER_KEY_NOT_FOUND');
      assert.equal((await list(owner)).length, 1);
    });
  });

  describe('errors', () => {
    test('DESIGN §6: a provider outside the list in the path → 400 VALIDATION_ERROR', async () => {
      const user = newUser();
      for (const [method, body] of [
        ['PUT', { apiKey: 'sk-something-long' }],
        ['PATCH', { active: true }],
        ['DELETE', undefined],
      ] as const) {
        for (const provider of ['cohere', 'OpenAI', 'openai%20']) {
          const res = await k.t.call(method, `/api/advisor/provider-keys/${provider}`, { user, body });
          assert.equal(res.statusCode, 400, `${method} ${provider}`);
          assert.equal(codeOf(res), 'VALIDATION_ERROR');
        }
      }
    });

    test('spec 4.2: an invalid body → 400 PROVIDER_KEY_INVALID, no provider called, nothing stored', async () => {
      const user = newUser();
      const before = k.fakes.providers.openai.requests.length;
      const bodies: unknown[] = [
        {},
        { apiKey: 42 },
        { apiKey: '' },
        { apiKey: 'short' },
        { apiKey: 'has a space inside' },
        { apiKey: 'x'.repeat(513) },
        { apiKey: valid('openai'), extra: true },
        { apiKey: valid('openai'), defaultModel: '' },
        [valid('openai')],
        null,
      ];
      for (const body of bodies) {
        const res = await put(user, 'openai', body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(codeOf(res), 'PROVIDER_KEY_INVALID', JSON.stringify(body));
      }
      assert.equal(k.fakes.providers.openai.requests.length, before);
      assert.deepEqual(await list(user), []);
    });

    test('spec 4.2 rule 3: a rejected key leaves the earlier key as it was', async () => {
      const user = newUser();
      const first = (await put(user, 'openai', { apiKey: valid('openai') })).json<Item>();
      const res = await put(user, 'openai', { apiKey: 'sk-rejected-0000' });
      assert.equal(codeOf(res), 'PROVIDER_KEY_INVALID');
      assert.deepEqual(await list(user), [first]);
      assert.equal((await usableKey(k.t.deps, user)).apiKey, valid('openai'));
    });

    test('DESIGN §2: key routes need a bearer token → 401 UNAUTHENTICATED', async () => {
      for (const [method, url] of [
        ['GET', '/api/advisor/provider-keys'],
        ['PUT', '/api/advisor/provider-keys/openai'],
      ] as const) {
        const res = await k.t.call(method, url, { user: null, body: method === 'PUT' ? { apiKey: valid('openai') } : undefined });
        assert.equal(res.statusCode, 401);
        assert.equal(codeOf(res), 'UNAUTHENTICATED');
      }
    });
  });
});
