import { sql, type Kysely } from 'kysely';

const USERS_PER_BATCH = 200;

/**
 * Account names are unique per user by the form a reader sees (`accountNameKey`: NFKC, invisible
 * characters removed, case folded, Cyrillic and Greek look-alikes as Latin), stored in `name_key`
 * beside the display name, instead of by `lower(name)`. Existing rows get their key here, by the
 * rule as it was when this ran (below, frozen; a later rule ships as a new migration). Two existing
 * names of one user that now share a key both stay as they are (nothing the user wrote is rewritten): the older keeps the key, each later one gets the key
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

/** The rule of features/accounts/name-key.ts when this migration ran (its reasons are documented there). */
function accountNameKey(name: string): string {
  const visible = name.normalize('NFKC').replace(SPACES, ' ').replace(INVISIBLE, '');
  const folded = visible.toLowerCase().toUpperCase().toLowerCase().normalize('NFKC');
  // Composed again: a mapped base letter may now compose with the accent that follows it.
  const latin = folded.replace(LOOKALIKE, (c) => LATIN_LOOKALIKES[c] ?? c).normalize('NFKC');
  return latin.replace(SPACES, ' ').trim();
}

// Tabs and line breaks are spaces here (before control characters go as invisible); U+FEFF is not.
const SPACES = /\p{White_Space}+/gu;
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/gu;

/**
 * Folded (lower-case) Cyrillic and Greek letters → the Latin letter their capital or small form is
 * drawn like (Cyrillic в: its capital В looks like B; Greek ν: its capital Ν looks like N).
 */
const LATIN_LOOKALIKES: Readonly<Record<string, string>> = {
  // Cyrillic
  а: 'a',
  в: 'b',
  е: 'e',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  ѕ: 's',
  і: 'i',
  ј: 'j',
  ԛ: 'q',
  ԝ: 'w',
  һ: 'h',
  ү: 'y',
  ӏ: 'l',
  // Greek
  α: 'a',
  β: 'b',
  ε: 'e',
  ζ: 'z',
  η: 'h',
  ι: 'i',
  κ: 'k',
  μ: 'm',
  ν: 'n',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'y',
  χ: 'x',
};

const LOOKALIKE = new RegExp(`[${Object.keys(LATIN_LOOKALIKES).join('')}]`, 'gu');
