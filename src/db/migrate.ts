import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import { openUnbounded } from './create-db.ts';
import type { Db } from './types.ts';
import * as m0001 from './migrations/0001-foundation.ts';
import * as m0002 from './migrations/0002-platform.ts';
import * as m0003 from './migrations/0003-advisor-keys.ts';
import * as m0004 from './migrations/0004-conversations.ts';
import * as m0005 from './migrations/0005-billing.ts';
import * as m0006 from './migrations/0006-turn-reservation.ts';
import * as m0007 from './migrations/0007-reserve-turn-locks.ts';
import * as m0009 from './migrations/0009-account-name-key.ts';
import * as m0010 from './migrations/0010-billing-rules-once.ts';
import * as m0013 from './migrations/0013-message-parts.ts';
import * as m0014 from './migrations/0014-usage-receipts.ts';
import * as m0015 from './migrations/0015-turn-alive.ts';
import * as m0016 from './migrations/0016-frame-logs.ts';
import * as m0017 from './migrations/0017-live-turn-fence.ts';
import * as m0018 from './migrations/0018-trades.ts';
import * as m0019 from './migrations/0019-conversation-search.ts';
import * as m0020 from './migrations/0020-search-document-uncompressed.ts';
import * as m0021 from './migrations/0021-instruments-round-trips.ts';
import * as m0022 from './migrations/0022-journal-speed.ts';
import * as m0023 from './migrations/0023-trip-groups.ts';
import * as m0024 from './migrations/0024-checkout-outcomes.ts';
import * as m0025 from './migrations/0025-message-grounding.ts';

/** Every migration, in order. A feature adds its file here; names never change once shipped. */
const MIGRATIONS: Record<string, Migration> = {
  '0001-foundation': m0001,
  '0002-platform': m0002,
  '0003-advisor-keys': m0003,
  '0004-conversations': m0004,
  '0005-billing': m0005,
  '0006-turn-reservation': m0006,
  '0007-reserve-turn-locks': m0007,
  '0009-account-name-key': m0009,
  '0010-billing-rules-once': m0010,
  '0013-message-parts': m0013,
  '0014-usage-receipts': m0014,
  '0015-turn-alive': m0015,
  '0016-frame-logs': m0016,
  '0017-live-turn-fence': m0017,
  '0018-trades': m0018,
  '0019-conversation-search': m0019,
  '0020-search-document-uncompressed': m0020,
  '0021-instruments-round-trips': m0021,
  '0022-journal-speed': m0022,
  '0023-trip-groups': m0023,
  '0024-checkout-outcomes': m0024,
  '0025-message-grounding': m0025,
};

class StaticProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return MIGRATIONS;
  }
}

/**
 * Applies pending migrations; safe to run from several instances at once (Kysely takes a lock). They
 * run on a connection without the statement deadlines: a migration, or waiting for another
 * instance's, may take longer than any request's statement should.
 */
export async function migrateToLatest(db: Db): Promise<void> {
  await migrate(db);
}

/** Applies pending migrations up to and including `name` (tests of a migration's backfill). */
export async function migrateUpTo(db: Db, name: string): Promise<void> {
  await migrate(db, name);
}

// The migrator's bookkeeping tables go in the session's own schema, named: a second deployment or
// test run in the same database has its own.
async function currentSchema(db: Db): Promise<string | undefined> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  return rows[0]?.schema;
}

async function migrate(db: Db, upTo?: string): Promise<void> {
  // Asked through the requests' own pool, so a start whose pool cannot connect as configured (a
  // pooler refusing the statement_timeout startup parameter) fails here, not on the first request.
  const schema = await currentSchema(db);
  const own = openUnbounded(db);
  try {
    const migrator = new Migrator({ db: own ?? db, provider: new StaticProvider(), ...(schema ? { migrationTableSchema: schema } : {}) });
    const { error, results } = upTo === undefined ? await migrator.migrateToLatest() : await migrator.migrateTo(upTo);
    const failed = results?.find((r) => r.status === 'Error');
    if (error || failed) {
      throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${String(error)}`);
    }
  } finally {
    await own?.destroy();
  }
}
