import { sql, type Kysely } from 'kysely';
import { accountNameKey } from '../../features/accounts/name-key.ts';

const USERS_PER_BATCH = 200;

/**
 * Account names are unique per user by the form a reader sees (`accountNameKey`: NFKC, invisible
 * characters removed, case folded, Cyrillic and Greek look-alikes as Latin), stored in `name_key`
 * beside the display name, instead of by `lower(name)`. Existing rows get their key here, in the
 * service's own function. Two existing names of one user that now share a key both stay as they
 * are (nothing the user wrote is rewritten): the older keeps the key, each later one gets the key
 * followed by \u0001 and its id, which no name's key contains, until it is renamed.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table accounts add column name_key text`.execute(db);
  // A few hundred users at a time; each user's accounts (a handful) in creation order.
  let lastUser: string | undefined;
  for (;;) {
    const users = await sql<{ user_id: string }>`
      select distinct user_id from accounts
      ${lastUser === undefined ? sql`` : sql`where user_id > ${lastUser}`}
      order by user_id
      limit ${USERS_PER_BATCH}`.execute(db);
    const ids = users.rows.map((r) => r.user_id);
    if (ids.length === 0) break;
    const { rows } = await sql<{ id: string; user_id: string; name: string }>`
      select id, user_id, name from accounts
      where user_id in (${sql.join(ids)})
      order by user_id, created_at, id`.execute(db);
    const keys: { id: string; key: string }[] = [];
    const taken = new Set<string>();
    for (const row of rows) {
      const key = accountNameKey(row.name);
      const perUser = JSON.stringify([row.user_id, key]);
      keys.push({ id: row.id, key: taken.has(perUser) ? `${key}\u0001${row.id}` : key });
      taken.add(perUser);
    }
    const values = sql.join(keys.map((k) => sql`(${k.id}::uuid, ${k.key})`));
    await sql`update accounts set name_key = v.key from (values ${values}) as v(id, key) where accounts.id = v.id`.execute(db);
    lastUser = ids[ids.length - 1];
  }
  await sql`alter table accounts alter column name_key set not null`.execute(db);
  await sql`create unique index accounts_user_name_key_uq on accounts (user_id, name_key)`.execute(db);
  await sql`drop index accounts_user_name_uq`.execute(db);
}
