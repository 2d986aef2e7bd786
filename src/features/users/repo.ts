import { sql } from 'kysely';
import type { Db } from '../../db/types.ts';

/** Creates the user on first sight; a tier asserted by the token replaces the stored one. */
export async function upsertUser(db: Db, id: string, tier: string | null): Promise<void> {
  if (tier === null) {
    await db
      .insertInto('users')
      .values({ id, tier: null })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    return;
  }
  await db
    .insertInto('users')
    .values({ id, tier })
    .onConflict((oc) =>
      oc
        .column('id')
        .doUpdateSet({ tier })
        .where(sql<boolean>`users.tier is distinct from ${tier}`),
    )
    .execute();
}

/**
 * The user's tier name by the database function user_tier (db/migrations/reserve-turn-v4.ts), the
 * same rule reserve_turn applies; a user not stored yet has the default tier too.
 */
export async function effectiveTier(db: Db, id: string, tiers: string, defaultTier: string): Promise<string> {
  const { rows } = await sql<{ tier: string }>`select user_tier(${id}::text, ${tiers}::jsonb, ${defaultTier}::text) as tier`.execute(db);
  const row = rows[0];
  if (!row) throw new Error('user_tier returned no row');
  return row.tier;
}

export async function setUserTier(db: Db, id: string, tier: string): Promise<void> {
  await db
    .insertInto('users')
    .values({ id, tier })
    .onConflict((oc) => oc.column('id').doUpdateSet({ tier }))
    .execute();
}
