// DESIGN §10: with DATABASE_URL every instance shares ENCRYPTION_KEYS and the token secret; the start
// generates neither then, and refuses a keyring that could read none of the stored keys.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { jwtVerify } from 'jose';
import pg from 'pg';
import { ConfigError, loadConfig } from '../src/config.ts';
import { runToEnd } from './helpers/server-process.ts';
import { createDeps } from '../src/deps.ts';
import { createLogger } from '../src/logger.ts';
import { createVault, parseKeyring } from '../src/platform/aes-vault.ts';
import { STORES, TEST_JWT_SECRET } from './helpers/app.ts';

const key = (id: string): string => `${id}:${randomBytes(32).toString('base64')}`;
const SOME_DATABASE = 'postgres://postgres@127.0.0.1:5432/advisor';
const JWKS = { AUTH_JWKS_URL: 'https://idp.example.test/.well-known/jwks.json', AUTH_ISSUER: 'https://idp.example.test/', AUTH_AUDIENCE: 'advisor' };

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ DATA_DIR: '/tmp/advisor-config-only', ...env });
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

const run = (script: string, args: string[], env: Record<string, string>): ReturnType<typeof runToEnd> =>
  runToEnd([script, ...args], { PATH: process.env.PATH ?? '', ...env });

describe('secrets every instance shares (DESIGN §10)', () => {
  test('DESIGN §10: with DATABASE_URL, a start without ENCRYPTION_KEYS or AUTH_JWT_SECRET is refused naming them; AUTH_JWKS_URL stands in for AUTH_JWT_SECRET', () => {
    const both = problems({ DATABASE_URL: SOME_DATABASE });
    assert.equal(both.length, 2, both.join('; '));
    assert.match(both[0] ?? '', /^ENCRYPTION_KEYS must be set with DATABASE_URL/);
    assert.match(both[1] ?? '', /^AUTH_JWT_SECRET \(or AUTH_JWKS_URL\) must be set with DATABASE_URL/);
    assert.deepEqual(
      problems({ DATABASE_URL: SOME_DATABASE, AUTH_JWT_SECRET: TEST_JWT_SECRET }).map((p) => p.split(' ')[0]),
      ['ENCRYPTION_KEYS'],
    );
    assert.deepEqual(
      problems({ DATABASE_URL: SOME_DATABASE, ENCRYPTION_KEYS: key('k1') }).map((p) => p.split(' ')[0]),
      ['AUTH_JWT_SECRET'],
    );
    assert.deepEqual(problems({ DATABASE_URL: SOME_DATABASE, ENCRYPTION_KEYS: key('k1'), AUTH_JWT_SECRET: TEST_JWT_SECRET }), []);
    assert.deepEqual(problems({ DATABASE_URL: SOME_DATABASE, ENCRYPTION_KEYS: key('k1'), ...JWKS }), []);
    // The embedded default still generates both (one process, one DATA_DIR).
    assert.deepEqual(problems({}), []);
  });

  test('DESIGN §10: `node src/server.ts` with DATABASE_URL and no secrets exits 1 naming ENCRYPTION_KEYS and AUTH_JWT_SECRET, generating nothing', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-secrets-'));
    try {
      const start = await run('src/server.ts', [], { DATA_DIR: dataDir, PORT: '0', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/unreachable' });
      assert.equal(start.code, 1);
      assert.match(start.stderr, /ENCRYPTION_KEYS must be set with DATABASE_URL/);
      assert.match(start.stderr, /AUTH_JWT_SECRET \(or AUTH_JWKS_URL\) must be set with DATABASE_URL/);
      assert.deepEqual(readdirSync(dataDir), []);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('issue 26: `npm run token` signs with the AUTH_JWT_SECRET the server is given (nothing generated in DATA_DIR), and refuses when tokens come from AUTH_JWKS_URL', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-secrets-'));
    try {
      const minted = await run('scripts/token.ts', ['dana'], { DATA_DIR: dataDir, AUTH_JWT_SECRET: TEST_JWT_SECRET });
      assert.equal(minted.code, 0, minted.stderr);
      const { payload } = await jwtVerify(minted.stdout.trim(), new TextEncoder().encode(TEST_JWT_SECRET));
      assert.equal(payload.sub, 'dana');
      assert.equal(existsSync(path.join(dataDir, 'jwt-secret')), false);

      const shared = await run('scripts/token.ts', ['dana'], { DATA_DIR: dataDir, DATABASE_URL: SOME_DATABASE, ENCRYPTION_KEYS: key('k1') });
      assert.equal(shared.code, 2);
      assert.match(shared.stderr, /AUTH_JWT_SECRET \(or AUTH_JWKS_URL\) must be set with DATABASE_URL/);

      const idp = await run('scripts/token.ts', ['dana'], { DATA_DIR: dataDir, ...JWKS });
      assert.equal(idp.code, 2);
      assert.match(idp.stderr, /AUTH_JWKS_URL is set/);
      assert.deepEqual(readdirSync(dataDir), []);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("DESIGN §10: a keyring holding none of the key ids the database's stored keys use stops the start naming ENCRYPTION_KEYS and those ids; an empty database, or a keyring holding one of them, starts", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-secrets-'));
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const open = (encryptionKeys: string) =>
      createDeps(
        loadConfig({
          DATA_DIR: dataDir,
          DATABASE_URL: STORES.databaseUrl,
          REDIS_URL: STORES.redisUrl,
          ENCRYPTION_KEYS: encryptionKeys,
          AUTH_JWT_SECRET: TEST_JWT_SECRET,
        }),
        { logger: createLogger('silent'), ...(STORES.databaseUrl ? { dbSchema: schema } : {}) },
      );
    const [old1, mkt2, new3] = [key('old1'), key('mkt2'), key('new3')];
    try {
      // An empty database starts with any keyring.
      const first = await open(old1);
      try {
        const provider = createVault(parseKeyring(old1)).seal('sk-test-provider-key', { userId: 'erin', kind: 'provider', provider: 'openai' });
        const market = createVault(parseKeyring(mkt2)).seal('market-key-0123', { userId: 'erin', kind: 'market-data', provider: 'polygon' });
        await sql`insert into users (id) values ('erin')`.execute(first.db);
        await sql`insert into provider_keys (user_id, provider, key_id, nonce, ciphertext, tag, key_hint_tail, default_model, active, created_at, updated_at)
          values ('erin', 'openai', ${provider.keyId}, ${provider.nonce}, ${provider.ciphertext}, ${provider.tag}, '-key', 'gpt-4o-mini', true, now(), now())`.execute(
          first.db,
        );
        await sql`insert into market_data_keys (user_id, provider, key_id, nonce, ciphertext, tag, key_hint_tail, created_at, updated_at)
          values ('erin', 'polygon', ${market.keyId}, ${market.nonce}, ${market.ciphertext}, ${market.tag}, '0123', now(), now())`.execute(first.db);
      } finally {
        await first.close();
      }

      await assert.rejects(open(new3), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(
          err.message,
          /ENCRYPTION_KEYS holds none of the key ids the database's stored keys are sealed under \(mkt2, old1; the keyring holds new3\)/,
        );
        return true;
      });
      // One id in common is enough (a rotation under way); so is the other one.
      for (const keyring of [`${new3},${old1}`, mkt2]) {
        const deps = await open(keyring);
        await deps.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      if (STORES.databaseUrl) {
        const client = new pg.Client({ connectionString: STORES.databaseUrl });
        await client.connect();
        await client.query(`drop schema if exists "${schema}" cascade`);
        await client.end();
      }
    }
  });
});
