// The start statement finds a turn's catalogue entry in SQL (repo.catalogueRows): the same entry as
// findModel for every model, `*` globs and characters LIKE would read as wildcards alike, first match winning.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { findModel, type Catalogue, type ModelEntryConfig } from '../../catalogue.ts';
import type { DbHandle } from '../../db/create-db.ts';
import { catalogueRows } from './turn-statements.ts';
import { migratedEmbeddedDb } from '../../../test/helpers/pglite-template.ts';

let h: DbHandle;
before(async () => {
  h = await migratedEmbeddedDb();
});
after(() => h.close());

const entry = (match: string, creditsPerTurn: number): ModelEntryConfig => ({ provider: 'openai', match, allowance: false, creditsPerTurn });
const models = [
  entry('gpt-4o-mini*', 1),
  entry('gpt-4o*', 2),
  entry('a_b', 3),
  entry('x%y*', 4),
  entry('pre*mid*suf', 5),
  entry('back\\slash', 6),
  entry("it's*", 8),
  entry('*', 7),
];

test('DESIGN §1 (first matching entry wins): the start statement finds the entry findModel finds, wildcard characters and quotes taken literally', async () => {
  const catalogue = { models } as unknown as Catalogue;
  const names = [
    'gpt-4o-mini',
    'gpt-4o-mini-2024',
    'gpt-4o',
    'gpt-4o-x',
    'a_b',
    'aXb',
    'x%y',
    'x%yz',
    'xAy',
    'premidsuf',
    'pre-mid-suf',
    'premisuf',
    'back\\slash',
    'backslash',
    "it's-1",
    "it''s",
    'other',
  ];
  for (const model of names) {
    const { rows } = await sql<{ cost: number }>`select m.cost from ${catalogueRows(models)}
      where m.provider = 'openai' and ${model} like m.pattern escape '\\' order by m.ord limit 1`.execute(h.db);
    assert.equal(Number(rows[0]?.cost), findModel(catalogue, 'openai', model)?.creditsPerTurn, model);
  }
});
