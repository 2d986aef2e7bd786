import { Migrator, type Migration, type MigrationProvider } from 'kysely';
import type { Db } from './types.ts';
import * as m0001 from './migrations/0001-foundation.ts';
import * as m0002 from './migrations/0002-platform.ts';

/** Every migration, in order. A feature adds its file here; names never change once shipped. */
const MIGRATIONS: Record<string, Migration> = {
  '0001-foundation': m0001,
  '0002-platform': m0002,
};

class StaticProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return MIGRATIONS;
  }
}

/** Applies pending migrations; safe to run from several instances at once (Kysely takes a lock). */
export async function migrateToLatest(db: Db, schema?: string): Promise<void> {
  // Name the schema when there is one: Kysely looks its bookkeeping tables up across all schemas.
  const migrator = new Migrator({ db, provider: new StaticProvider(), ...(schema ? { migrationTableSchema: schema } : {}) });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${String(error)}`);
  }
}
