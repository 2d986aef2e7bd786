import { sql } from 'kysely';
import type { Db } from '../../db/types.ts';

/** Creates the user on first sight; a tier asserted by the token replaces the stored one. */
export async function upsertUser(db: Db, id: string, tier: string | null): Promise<void> {
  if (tier === null) {
    await db.insertInto('users').values({ id, tier: null }).onConflict((oc) => oc.column('id').doNothing()).execute();
    return;
  }
  await db
    .insertInto('users')
    .values({ id, tier })
    .onConflict((oc) => oc.column('id').doUpdateSet({ tier }).where(sql<boolean>`users.tier is distinct from ${tier}`))
    .execute();
}

export async function findUserTier(db: Db, id: string): Promise<string | null | undefined> {
  const row = await db.selectFrom('users').select('tier').where('id', '=', id).executeTakeFirst();
  return row ? row.tier : undefined;
}

export async function setUserTier(db: Db, id: string, tier: string): Promise<void> {
  await db
    .insertInto('users')
    .values({ id, tier })
    .onConflict((oc) => oc.column('id').doUpdateSet({ tier }))
    .execute();
}
