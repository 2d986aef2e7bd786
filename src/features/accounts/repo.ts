import type { Selectable } from 'kysely';
import type { AccountsTable, BrokeragesTable, Db, Trx } from '../../db/types.ts';

export type AccountRow = Selectable<AccountsTable>;
export type BrokerageRow = Selectable<BrokeragesTable>;

export function listAccounts(db: Db, userId: string): Promise<AccountRow[]> {
  return db.selectFrom('accounts').selectAll().where('user_id', '=', userId).orderBy('created_at').orderBy('id').execute();
}

export function findAccount(db: Db | Trx, userId: string, id: string): Promise<AccountRow | undefined> {
  return db.selectFrom('accounts').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
}

export function lockAccount(trx: Trx, userId: string, id: string): Promise<AccountRow | undefined> {
  return trx.selectFrom('accounts').selectAll().where('id', '=', id).where('user_id', '=', userId).forUpdate().executeTakeFirst();
}

export function insertAccount(trx: Trx, row: AccountRow): Promise<AccountRow> {
  return trx.insertInto('accounts').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateAccount(
  trx: Trx,
  id: string,
  patch: Partial<Pick<AccountRow, 'name' | 'name_key' | 'currency' | 'timezone' | 'brokerage_id' | 'updated_at'>>,
): Promise<AccountRow> {
  return trx.updateTable('accounts').set(patch).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function deleteAccount(db: Db, userId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('accounts').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return r.numDeletedRows > 0n;
}

/** Records the zone in force from `from` on (same instant twice: the later change wins). */
export async function insertTimezoneChange(trx: Trx, accountId: string, timezone: string, from: Date): Promise<void> {
  await trx
    .insertInto('account_timezones')
    .values({ account_id: accountId, timezone, effective_from: from })
    .onConflict((oc) => oc.columns(['account_id', 'effective_from']).doUpdateSet({ timezone }))
    .execute();
}

/** Every zone change of an account, oldest first. */
export function timezoneHistory(db: Db | Trx, accountId: string): Promise<{ timezone: string; effective_from: Date }[]> {
  return db.selectFrom('account_timezones').select(['timezone', 'effective_from']).where('account_id', '=', accountId).orderBy('effective_from').execute();
}

/** Owner of a brokerage, or undefined when it does not exist. */
export async function brokerageOwner(db: Db | Trx, id: string): Promise<string | undefined> {
  const row = await db.selectFrom('brokerages').select('user_id').where('id', '=', id).executeTakeFirst();
  return row?.user_id;
}

export function listBrokerages(db: Db, userId: string): Promise<BrokerageRow[]> {
  return db.selectFrom('brokerages').selectAll().where('user_id', '=', userId).orderBy('created_at').orderBy('id').execute();
}

export function insertBrokerage(db: Db, row: { id: string; user_id: string; name: string; created_at: Date }): Promise<BrokerageRow> {
  return db.insertInto('brokerages').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function deleteBrokerage(db: Db, userId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('brokerages').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return r.numDeletedRows > 0n;
}
