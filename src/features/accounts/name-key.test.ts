import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { sql } from 'kysely';
import { createDb } from '../../db/create-db.ts';
import { migrateToLatest, migrateUpTo } from '../../db/migrate.ts';
import { accountNameKey } from './name-key.ts';

describe('issue 14 item 10: account name keys', () => {
  test('one key for names a reader cannot tell apart; distinct keys for names that differ', () => {
    const same: [string, string[]][] = [
      [
        'main',
        [
          'Main',
          'MAIN',
          'M\u0430in',
          '\uff2d\uff41\uff49\uff4e',
          'Ma\u200bin',
          'Ma\u200cin',
          'Ma\u200din',
          'M\u00adain',
          'Main\ufeff',
          'Ma\u2060in',
          'Ma\u202ein',
          '  Main ',
          '\u039c\u0430\u0456n',
        ],
      ],
      ['café', ['Caf\u00e9', 'Cafe\u0301', 'CAF\u00c9', 'CAFE\u0301']],
      ['joint account', ['Joint Account', 'Joint  Account', 'Joint\u00a0Account', 'Joint\tAccount', 'JOINT\u2003ACCOUNT']],
      ['strasse', ['Stra\u00dfe', 'STRASSE']],
      ['bono', ['\u0392\u039f\u039d\u039f', 'BONO']],
    ];
    for (const [key, names] of same) {
      for (const name of names) assert.equal(accountNameKey(name), key, JSON.stringify(name));
    }
    const distinct = ['Main', 'Mainz', 'Main 2', 'Cafe', 'Café', 'Mаin Street'];
    assert.equal(new Set(distinct.map(accountNameKey)).size, distinct.length);
    assert.equal(accountNameKey('\u200b\u200d\u00ad'), '');
  });

  test('a key is its own key, and a name in upper or lower case has the same key (properties)', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme', maxLength: 30 }), (name) => accountNameKey(accountNameKey(name)) === accountNameKey(name)));
    const tricky = fc.constantFrom(...'ΣσςΟοΑαΝνIİıiаАвВMmн \u00a0\u200b\u00ad\u0301\u0308ÉßẞǅǆǄﬁＭ\t'.split(''));
    fc.assert(
      fc.property(fc.array(tricky, { maxLength: 16 }), (chars) => {
        const name = chars.join('');
        const key = accountNameKey(name);
        return accountNameKey(key) === key && accountNameKey(name.toUpperCase()) === accountNameKey(name.toLowerCase());
      }),
      { numRuns: 2000 },
    );
  });

  test('migration 0009 gives existing accounts their key; the older of two look-alikes keeps it, nothing is renamed', async () => {
    const { db, close } = await createDb({ pgliteDir: 'memory://' });
    try {
      await migrateUpTo(db, '0007-reserve-turn-locks');
      await sql`insert into users (id) values ('u1'), ('u2')`.execute(db);
      const insert = (id: string, user: string, name: string, at: string) =>
        sql`insert into accounts (id, user_id, name, currency, timezone, starting_balance, created_at, updated_at)
            values (${id}, ${user}, ${name}, 'USD', 'Etc/UTC', 0, ${at}, ${at})`.execute(db);
      await insert('00000000-0000-4000-8000-000000000002', 'u1', 'M\u0430in', '2026-01-02T00:00:00Z');
      await insert('00000000-0000-4000-8000-000000000001', 'u1', 'Main', '2026-01-01T00:00:00Z');
      await insert('00000000-0000-4000-8000-000000000003', 'u1', 'Swing', '2026-01-03T00:00:00Z');
      await insert('00000000-0000-4000-8000-000000000004', 'u2', 'MAIN', '2026-01-01T00:00:00Z');
      await migrateToLatest(db);
      const rows = await sql<{ id: string; name: string; name_key: string }>`select id, name, name_key from accounts order by id`.execute(db);
      assert.deepEqual(
        rows.rows.map((r) => [r.name, r.name_key]),
        [
          ['Main', 'main'],
          ['M\u0430in', 'main\u0001' + '00000000-0000-4000-8000-000000000002'],
          ['Swing', 'swing'],
          ['MAIN', 'main'],
        ],
      );
      await assert.rejects(insert('00000000-0000-4000-8000-000000000005', 'u1', 'main', '2026-01-04T00:00:00Z'));
    } finally {
      await close();
    }
  });
});
