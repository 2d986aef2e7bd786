import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { PROVIDERS } from '../../catalogue.ts';
import { createVault, parseKeyring } from '../../platform/aes-vault.ts';
import { buildTestApp, TEST_ENCRYPTION_KEYS, type TestApp } from '../../../test/helpers/app.ts';
import { rewrapAllKeys } from './rewrap.ts';
import { newUser, startKeyFakes, type KeyFakes, usableKey } from '../../../test/kits/advisor-keys.ts';

const NEW_KEYRING = `rot2:${randomBytes(32).toString('base64')}`;

describe('key secrets (DESIGN §5)', () => {
  let t: TestApp;
  // A second instance on t's database whose probes give up at the stalled deadline.
  let stalled: TestApp;
  let fakes: KeyFakes;
  before(async () => {
    fakes = await startKeyFakes();
    t = await buildTestApp({ env: fakes.env({ LOG_LEVEL: 'trace' }) });
    stalled = await buildTestApp({ env: fakes.env({ LOG_LEVEL: 'trace' }, 'stalled'), shareWith: t });
  });
  after(async () => {
    await stalled.close();
    await t.close();
    await fakes.close();
  });
  beforeEach(() => fakes.reset());

  /** Every row of every table, as text (bytea shows as hex, so only a plaintext copy could match). */
  async function everyRow(): Promise<string> {
    const tables = await sql<{ table_name: string }>`
      select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'`.execute(t.deps.db);
    assert.ok(tables.rows.some((r) => r.table_name === 'provider_keys'));
    const texts: string[] = [];
    for (const { table_name } of tables.rows) {
      const rows = await sql<{ j: string }>`select row_to_json(x)::text as j from ${sql.table(table_name)} x`.execute(t.deps.db);
      texts.push(...rows.rows.map((r) => r.j));
    }
    return texts.join('\n');
  }

  test('DESIGN §5: a canary key saved through every route appears in no response, log line or column but the ciphertext', async () => {
    const canary = `canary${randomBytes(12).toString('hex')}`;
    const rejected = `canaryrejected${randomBytes(12).toString('hex')}`;
    for (const p of PROVIDERS) fakes.providers[p].addValidKey(canary);
    fakes.polygon.addValidKey(canary);
    // Three users, so no one reaches the 10-saves-per-hour limit.
    const [user, second, third] = [newUser(), newUser(), newUser()];
    const bodies: string[] = [];
    const callOn = async (app: TestApp, ...args: Parameters<TestApp['call']>) => {
      const res = await app.call(...args);
      bodies.push(res.body, JSON.stringify(res.headers));
      return res;
    };
    const call = (...args: Parameters<TestApp['call']>) => callOn(t, ...args);
    for (const p of PROVIDERS) assert.equal((await call('PUT', `/api/advisor/provider-keys/${p}`, { user, body: { apiKey: canary } })).statusCode, 200);
    fakes.providers.openai.setProbe('stall');
    assert.equal((await callOn(stalled, 'PUT', '/api/advisor/provider-keys/openai', { user: second, body: { apiKey: ` ${canary} ` } })).statusCode, 200);
    fakes.reset();
    assert.equal((await call('PUT', '/api/advisor/provider-keys/openai', { user: second, body: { apiKey: rejected } })).statusCode, 400);
    assert.equal((await call('PUT', '/api/advisor/provider-keys/google', { user: second, body: { apiKey: rejected } })).statusCode, 400);
    assert.equal((await call('PUT', '/api/advisor/provider-keys/xai', { user: third, body: { apiKey: canary, extra: canary } })).statusCode, 400);
    assert.equal((await call('PUT', '/api/advisor/provider-keys/xai', { user: third, body: { apiKey: `${canary} ${canary}` } })).statusCode, 400);
    assert.equal((await call('PATCH', '/api/advisor/provider-keys/openai', { user, body: { active: true } })).statusCode, 200);
    assert.equal((await call('GET', '/api/advisor/provider-keys', { user })).statusCode, 200);
    assert.equal((await call('PUT', '/api/advisor/market-data-key', { user, body: { apiKey: canary } })).statusCode, 200);
    assert.equal((await call('PUT', '/api/advisor/market-data-key', { user, body: { apiKey: rejected } })).statusCode, 400);
    assert.equal((await call('GET', '/api/advisor/market-data-key', { user })).statusCode, 200);
    assert.equal((await call('GET', '/openapi.json', { user })).statusCode, 200);
    assert.equal((await call('GET', '/metrics', { user })).statusCode, 200);
    assert.equal((await call('DELETE', '/api/advisor/provider-keys/groq', { user })).statusCode, 204);

    const logs = [...t.logs, ...stalled.logs].join('');
    assert.ok(logs.length > 0 && logs.includes('/api/advisor/provider-keys'), 'the requests were logged');
    const rows = await everyRow();
    assert.ok(rows.includes(canary.slice(-4)), 'the hint is stored');
    for (const secret of [canary, rejected]) {
      assert.ok(!bodies.some((b) => b.includes(secret)), 'no response carries the key');
      assert.ok(!logs.includes(secret), 'no log line carries the key');
      assert.ok(!rows.includes(secret), 'no column carries the key in clear');
    }
    assert.equal((await usableKey(t.deps, user)).apiKey, canary, 'yet the ciphertext holds it');
  });

  test('DESIGN §5: a ciphertext copied to another user or provider row fails to decrypt → 409 PROVIDER_KEY_DECRYPTION_FAILED', async () => {
    const alice = newUser('alice');
    const bob = newUser('bob');
    for (const [user, p] of [
      [alice, 'openai'],
      [alice, 'anthropic'],
      [bob, 'openai'],
    ] as const) {
      await t.call('PUT', `/api/advisor/provider-keys/${p}`, { user, body: { apiKey: fakes.providers[p].validKey } });
    }
    const source = await t.deps.db
      .selectFrom('provider_keys')
      .select(['key_id', 'nonce', 'ciphertext', 'tag'])
      .where('user_id', '=', alice)
      .where('provider', '=', 'openai')
      .executeTakeFirstOrThrow();
    const copyTo = (user: string, provider: string) =>
      t.deps.db.updateTable('provider_keys').set(source).where('user_id', '=', user).where('provider', '=', provider).execute();
    await copyTo(bob, 'openai');
    await copyTo(alice, 'anthropic');
    await assert.rejects(usableKey(t.deps, bob, 'openai'), { code: 'PROVIDER_KEY_DECRYPTION_FAILED', status: 409 });
    await assert.rejects(usableKey(t.deps, bob), { code: 'PROVIDER_KEY_DECRYPTION_FAILED' });
    await assert.rejects(usableKey(t.deps, alice, 'anthropic'), { code: 'PROVIDER_KEY_DECRYPTION_FAILED' });
    assert.equal((await usableKey(t.deps, alice, 'openai')).apiKey, fakes.providers.openai.validKey);
  });

  test('DESIGN §5: rewrap moves every row under the new first key; a second run changes none', async () => {
    const main = t;
    t = await buildTestApp({ env: fakes.env() });
    try {
      await rewrapScenario();
    } finally {
      await t.close();
      t = main;
    }
  });

  async function rewrapScenario(): Promise<void> {
    const users = [newUser('r1'), newUser('r2'), newUser('r3')];
    for (const user of users) {
      await t.call('PUT', '/api/advisor/provider-keys/openai', { user, body: { apiKey: fakes.providers.openai.validKey } });
      await t.call('PUT', '/api/advisor/provider-keys/google', { user, body: { apiKey: fakes.providers.google.validKey } });
      await t.call('PUT', '/api/advisor/market-data-key', { user, body: { apiKey: fakes.polygon.validKey } });
    }
    // A row sealed under a key no longer in the keyring: reported, left alone, and not looped over.
    const lost = users[0] ?? '';
    await t.deps.db.updateTable('provider_keys').set({ key_id: 'gone' }).where('user_id', '=', lost).where('provider', '=', 'google').execute();
    const countRows = async (table: 'provider_keys' | 'market_data_keys') =>
      (
        await t.deps.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n;
    const providerRows = await countRows('provider_keys');
    const marketRows = await countRows('market_data_keys');
    const before = await t.deps.db.selectFrom('provider_keys').selectAll().execute();

    const rotated = createVault(parseKeyring(`${NEW_KEYRING},${TEST_ENCRYPTION_KEYS}`));
    const first = await rewrapAllKeys({ db: t.deps.db, vault: rotated });
    assert.deepEqual(first.providerKeys, { rewrapped: providerRows - 1, alreadyCurrent: 0, failed: 1 });
    assert.deepEqual(first.marketDataKeys, { rewrapped: marketRows, alreadyCurrent: 0, failed: 0 });
    assert.deepEqual(first.failures, [{ table: 'provider_keys', userId: lost, provider: 'google' }]);
    const keyIds = await t.deps.db.selectFrom('provider_keys').select(['key_id', 'user_id', 'provider']).execute();
    assert.deepEqual(new Set(keyIds.map((r) => r.key_id)), new Set(['rot2', 'gone']));
    const after = await t.deps.db.selectFrom('provider_keys').selectAll().execute();
    for (const row of after) {
      const old = before.find((b) => b.user_id === row.user_id && b.provider === row.provider);
      assert.equal(row.updated_at.getTime(), old?.updated_at.getTime(), 'a rewrap is not a user change');
    }

    // Only the new key is needed from now on.
    const onlyNew = { ...t.deps, vault: createVault(parseKeyring(NEW_KEYRING)) };
    for (const user of users.slice(1)) assert.equal((await usableKey(onlyNew, user, 'google')).apiKey, fakes.providers.google.validKey);
    assert.equal((await usableKey(onlyNew, lost, 'openai')).apiKey, fakes.providers.openai.validKey);
    const market = await t.deps.db.selectFrom('market_data_keys').select('key_id').execute();
    assert.ok(market.every((r) => r.key_id === 'rot2'));

    const snapshot = JSON.stringify(await t.deps.db.selectFrom('provider_keys').selectAll().orderBy('user_id').orderBy('provider').execute());
    const second = await rewrapAllKeys({ db: t.deps.db, vault: rotated });
    assert.deepEqual(second.providerKeys, { rewrapped: 0, alreadyCurrent: providerRows - 1, failed: 1 });
    assert.deepEqual(second.marketDataKeys, { rewrapped: 0, alreadyCurrent: marketRows, failed: 0 });
    assert.equal(JSON.stringify(await t.deps.db.selectFrom('provider_keys').selectAll().orderBy('user_id').orderBy('provider').execute()), snapshot);
  }
});
