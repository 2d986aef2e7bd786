import { sql, type RawBuilder, type Selectable } from 'kysely';
import type { Db, MarketDataKeysTable, ProviderKeysTable, Trx } from '../../db/types.ts';

export type ProviderKeyRow = Selectable<ProviderKeysTable>;
export type MarketDataKeyRow = Selectable<MarketDataKeysTable>;

/** What the vault produced; the only columns derived from a key besides its hint. */
export interface SealedColumns {
  key_id: string;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  tag: Uint8Array;
}

// Namespaces this feature's advisory locks so they cannot collide with another feature's.
const KEYS_LOCK_NAMESPACE = 3003;

/**
 * Serialises every key write of one user (saves, active flag moves, rewrap), including the first
 * save of two providers at once, which row locks cannot cover because the rows do not exist yet.
 */
export async function lockUserKeys(trx: Trx, userId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(${KEYS_LOCK_NAMESPACE}, hashtext(${userId}))`.execute(trx);
}

export function listProviderKeys(db: Db, userId: string): Promise<ProviderKeyRow[]> {
  return db.selectFrom('provider_keys').selectAll().where('user_id', '=', userId).orderBy('provider').execute();
}

export function findProviderKey(db: Db | Trx, userId: string, provider: string): Promise<ProviderKeyRow | undefined> {
  return db.selectFrom('provider_keys').selectAll().where('user_id', '=', userId).where('provider', '=', provider).executeTakeFirst();
}

/** The sealed columns and what a turn needs of both keys; `default_model` is null on the market-data row. */
export interface TurnKeyRow extends SealedColumns {
  kind: 'provider' | 'market';
  user_id: string;
  provider: string;
  default_model: string | null;
}

/**
 * A turn's two keys as one query: the provider key (the active one, or `provider`'s: a value, or an
 * expression of the caller's statement) and the market-data key, each row tagged by its kind.
 */
export function turnKeysQuery(userId: string, provider: RawBuilder<string> | string | null): RawBuilder<TurnKeyRow> {
  const which = provider === null ? sql`active` : sql`provider = ${provider}`;
  return sql<TurnKeyRow>`
    select 'provider' as kind, user_id, provider, key_id, nonce, ciphertext, tag, default_model
      from provider_keys where user_id = ${userId} and ${which}
    union all
    select 'market', user_id, provider, key_id, nonce, ciphertext, tag, null
      from market_data_keys where user_id = ${userId}`;
}

/** Clears the active flag on every key of the user except `provider`'s. */
export async function deactivateOthers(trx: Trx, userId: string, provider: string, now: Date): Promise<void> {
  await trx
    .updateTable('provider_keys')
    .set({ active: false, updated_at: now })
    .where('user_id', '=', userId)
    .where('active', '=', true)
    .where('provider', '<>', provider)
    .execute();
}

/**
 * Saves or replaces a key as the user's one active key, in one statement (one round trip, one
 * commit: this is most of a save's own cost). The count over `deactivated` makes the insert wait
 * for the update, so the other keys are inactive before this row claims the partial unique index.
 * A concurrent save of another provider for the same user can still claim it first; that surfaces
 * as a unique violation, and the caller runs the statement again (it then sees that key).
 * A replaced key keeps its createdAt, the one column the caller does not already hold, so it is the
 * one returned (not the sealed bytes, which pg would read back and parse for nothing).
 */
export async function saveActiveProviderKey(db: Db, row: ProviderKeyRow): Promise<ProviderKeyRow> {
  const result = await saveActiveProviderKeyQuery(row).execute(db);
  const saved = result.rows[0];
  if (!saved) throw new Error('provider key upsert returned no row');
  return { ...row, created_at: saved.created_at };
}

/** The statement of saveActiveProviderKey (the key-save benchmark's floor compiles it too). */
export function saveActiveProviderKeyQuery(r: ProviderKeyRow): RawBuilder<Pick<ProviderKeyRow, 'created_at'>> {
  return sql<Pick<ProviderKeyRow, 'created_at'>>`
    with deactivated as (
      update provider_keys set active = false, updated_at = ${r.updated_at}
      where user_id = ${r.user_id} and active and provider <> ${r.provider}
      returning 1
    )
    insert into provider_keys
      (user_id, provider, key_id, nonce, ciphertext, tag, key_hint_tail, default_model, active, last_verified_at, rejected_at, rejected_reason,
       created_at, updated_at)
    select ${r.user_id}::text, ${r.provider}::text, ${r.key_id}::text, ${r.nonce}::bytea, ${r.ciphertext}::bytea, ${r.tag}::bytea,
      ${r.key_hint_tail}::text, ${r.default_model}::text, true, ${r.last_verified_at}::timestamptz, null, null, ${r.created_at}::timestamptz,
      ${r.updated_at}::timestamptz
    from (select count(*) from deactivated) as waited
    on conflict (user_id, provider) do update set
      key_id = excluded.key_id, nonce = excluded.nonce, ciphertext = excluded.ciphertext, tag = excluded.tag,
      key_hint_tail = excluded.key_hint_tail, default_model = excluded.default_model, active = true,
      last_verified_at = excluded.last_verified_at, rejected_at = null, rejected_reason = null, updated_at = excluded.updated_at
    returning created_at`;
}

export function updateProviderKey(
  trx: Trx,
  userId: string,
  provider: string,
  patch: Partial<Pick<ProviderKeyRow, 'default_model' | 'active' | 'updated_at'>>,
): Promise<ProviderKeyRow | undefined> {
  return trx.updateTable('provider_keys').set(patch).where('user_id', '=', userId).where('provider', '=', provider).returningAll().executeTakeFirst();
}

export async function deleteProviderKey(db: Db, userId: string, provider: string): Promise<boolean> {
  const r = await db.deleteFrom('provider_keys').where('user_id', '=', userId).where('provider', '=', provider).executeTakeFirst();
  return r.numDeletedRows > 0n;
}

export function findMarketDataKey(db: Db, userId: string): Promise<MarketDataKeyRow | undefined> {
  return db.selectFrom('market_data_keys').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

/** Saves or replaces the user's market-data key; a replaced key keeps its createdAt (the one column read back). */
export async function upsertMarketDataKey(db: Db, row: MarketDataKeyRow): Promise<MarketDataKeyRow> {
  const replace = {
    provider: row.provider,
    key_id: row.key_id,
    nonce: row.nonce,
    ciphertext: row.ciphertext,
    tag: row.tag,
    key_hint_tail: row.key_hint_tail,
    last_verified_at: row.last_verified_at,
    rejected_at: null,
    rejected_reason: null,
    updated_at: row.updated_at,
  };
  const saved = await db
    .insertInto('market_data_keys')
    .values(row)
    .onConflict((oc) => oc.column('user_id').doUpdateSet(replace))
    .returning('created_at')
    .executeTakeFirstOrThrow();
  return { ...row, created_at: saved.created_at };
}

export async function deleteMarketDataKey(db: Db, userId: string): Promise<boolean> {
  const r = await db.deleteFrom('market_data_keys').where('user_id', '=', userId).executeTakeFirst();
  return r.numDeletedRows > 0n;
}

/**
 * DESIGN §13: the provider refused the stored key sealed with `version` (its nonce) during a turn: it
 * is no longer verified, and keeps when and why. A key saved since is sealed anew: left alone (a
 * change of the active flag meanwhile is the same key, and is marked).
 */
export async function markKeyRejected(
  db: Db,
  table: 'provider_keys' | 'market_data_keys',
  userId: string,
  version: Uint8Array,
  at: Date,
  reason: string,
): Promise<boolean> {
  // The nonce names one stored key (a user's provider keys each have their own), so no provider is needed.
  const r = await db
    .updateTable(table)
    .set({ last_verified_at: null, rejected_at: at, rejected_reason: reason })
    .where('user_id', '=', userId)
    .where('nonce', '=', version)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/** Rewrap: the next batch of provider keys not under `keyId`, in primary-key order after `after`. */
export function staleProviderKeys(
  db: Db,
  keyId: string,
  after: { userId: string; provider: string } | undefined,
  limit: number,
): Promise<{ user_id: string; provider: string }[]> {
  let q = db.selectFrom('provider_keys').select(['user_id', 'provider']).where('key_id', '<>', keyId);
  if (after) q = q.where((eb) => eb(eb.refTuple('user_id', 'provider'), '>', eb.tuple(after.userId, after.provider)));
  return q.orderBy('user_id').orderBy('provider').limit(limit).execute();
}

export function staleMarketDataKeys(db: Db, keyId: string, afterUserId: string | undefined, limit: number): Promise<{ user_id: string }[]> {
  let q = db.selectFrom('market_data_keys').select('user_id').where('key_id', '<>', keyId);
  if (afterUserId !== undefined) q = q.where('user_id', '>', afterUserId);
  return q.orderBy('user_id').limit(limit).execute();
}

export function lockProviderKey(trx: Trx, userId: string, provider: string): Promise<ProviderKeyRow | undefined> {
  return trx.selectFrom('provider_keys').selectAll().where('user_id', '=', userId).where('provider', '=', provider).forUpdate().executeTakeFirst();
}

export function lockMarketDataKey(trx: Trx, userId: string): Promise<MarketDataKeyRow | undefined> {
  return trx.selectFrom('market_data_keys').selectAll().where('user_id', '=', userId).forUpdate().executeTakeFirst();
}

/** Replaces only the sealed columns: a rewrap is not a change the user made. */
export async function resealProviderKey(trx: Trx, userId: string, provider: string, sealed: SealedColumns): Promise<void> {
  await trx.updateTable('provider_keys').set(sealed).where('user_id', '=', userId).where('provider', '=', provider).execute();
}

export async function resealMarketDataKey(trx: Trx, userId: string, sealed: SealedColumns): Promise<void> {
  await trx.updateTable('market_data_keys').set(sealed).where('user_id', '=', userId).execute();
}

export async function countByKeyId(db: Db, table: 'provider_keys' | 'market_data_keys', keyId: string): Promise<{ current: number; stale: number }> {
  const row = await db
    .selectFrom(table)
    .select([
      sql<number>`count(*) filter (where key_id = ${keyId})::int`.as('current'),
      sql<number>`count(*) filter (where key_id <> ${keyId})::int`.as('stale'),
    ])
    .executeTakeFirstOrThrow();
  return { current: row.current, stale: row.stale };
}

/** Every key id a stored key is sealed under (DESIGN §10: the start checks its keyring holds one). */
export async function sealedKeyIds(db: Db): Promise<string[]> {
  const rows = await db.selectFrom('provider_keys').select('key_id').union(db.selectFrom('market_data_keys').select('key_id')).orderBy('key_id').execute();
  return rows.map((r) => r.key_id);
}
