// Test data. Small sets of users save their key through the API, as a user would; the 5,000 users
// of the memory row get theirs through the service's own vault and row layout in one statement
// (5,000 API saves would be most of the run, and the key-save row measures that path).
import type pg from 'pg';
import { createVault, parseKeyring } from '../../src/platform/aes-vault.ts';
import { hintTail, providerSlot } from '../../src/features/advisor-keys/sealing.ts';
import { TEST_ENCRYPTION_KEYS } from '../../test/helpers/app.ts';

const PROVIDER_KEY = 'sk-valid-openai';
/** The default model the service picks from the fake's model list; an allowance model. */
export const DEFAULT_MODEL = 'gpt-4o-mini';

/** Users with the pro tier and an active, verified OpenAI key (default model `model`), as a save through the API leaves them. */
export async function seedKeysDirect(pool: pg.Pool, userIds: readonly string[], model = DEFAULT_MODEL): Promise<void> {
  const vault = createVault(parseKeyring(TEST_ENCRYPTION_KEYS));
  const sealed = userIds.map((u) => vault.seal(PROVIDER_KEY, providerSlot(u, 'openai')));
  await pool.query(`insert into users (id, tier) select unnest($1::text[]), 'pro' on conflict (id) do update set tier = 'pro'`, [userIds]);
  await pool.query(
    `insert into provider_keys (user_id, provider, key_id, nonce, ciphertext, tag, key_hint_tail, default_model, active,
       last_verified_at, created_at, updated_at)
     select u, 'openai', $2, n, c, t, $6, $7, true, now(), now(), now()
     from unnest($1::text[], $3::bytea[], $4::bytea[], $5::bytea[]) as x(u, n, c, t)`,
    [userIds, vault.primaryKeyId, sealed.map((s) => s.nonce), sealed.map((s) => s.ciphertext), sealed.map((s) => s.tag), hintTail(PROVIDER_KEY), model],
  );
}

/** PUT /api/advisor/provider-keys/openai for each token, `concurrency` at a time; throws unless every save is 200. */
export async function saveKeysViaApi(serviceUrl: string, tokens: readonly string[], concurrency: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < tokens.length) {
        const token = tokens[next++];
        const res = await fetch(`${serviceUrl}/api/advisor/provider-keys/openai`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ apiKey: PROVIDER_KEY }),
        });
        const text = await res.text();
        if (res.status !== 200) throw new Error(`key save answered ${res.status}: ${text}`);
        const model = (JSON.parse(text) as { defaultModel?: string }).defaultModel;
        if (model !== DEFAULT_MODEL) throw new Error(`key saved with default model ${model}, expected ${DEFAULT_MODEL}`);
      }
    }),
  );
}

/**
 * `users` users (list-0 … list-{users-1}) with `perUser` conversations each, in one insert … select
 * from generate_series; updated_at spread over the last ~year so each user's list has a real order.
 */
export async function seedConversations(pool: pg.Pool, users: number, perUser: number): Promise<void> {
  await pool.query(`insert into users (id) select 'list-' || g from generate_series(0, $1::int - 1) g on conflict do nothing`, [users]);
  await pool.query(
    `insert into conversations (id, user_id, title, provider, model, persona_id, message_count, last_message_at, created_at, updated_at)
     select gen_random_uuid(), 'list-' || (g % $1::int), 'How did my ' || g || ' trade go, and what should I change next time?',
       'openai', $3, null, 2 + (g % 40), t, t - interval '5 minutes', t
     from generate_series(0, $1::int * $2::int - 1) g,
       lateral (select now() - (g * interval '31 seconds') - (random() * interval '1 second') as t) x`,
    [users, perUser, DEFAULT_MODEL],
  );
  // Steady state, as a table that has been in use: vacuumed (else autovacuum starts on a million
  // fresh rows during the measurement, on the same two cores), analyzed, and its pages on disk (else
  // the next checkpoint writes them out mid-run).
  await pool.query('vacuum (analyze) users');
  await pool.query('vacuum (analyze) conversations');
  await pool.query('checkpoint');
}
