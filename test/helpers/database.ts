import pg from 'pg';
import { pgErrorCode } from '../../src/db/create-db.ts';

const INVALID_CATALOG_NAME = '3D000';
const DUPLICATE_DATABASE = '42P04';

/**
 * Makes sure the database `url` names exists: a fresh PostgreSQL has only `postgres`, and the
 * suites' default URL names `test`. A missing one is created through the `postgres` maintenance
 * database; when that is not possible either, the error says how to create it.
 */
export async function ensureDatabase(url: string): Promise<void> {
  const probe = new pg.Client({ connectionString: url });
  try {
    await probe.connect();
    await probe.end();
    return;
  } catch (err) {
    await probe.end().catch(() => undefined);
    if (pgErrorCode(err) !== INVALID_CATALOG_NAME) throw err;
  }
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const how = `create it (createdb -h ${target.hostname} -p ${target.port || 5432} -U ${decodeURIComponent(target.username) || 'postgres'} ${name}) or point DATABASE_URL at an existing database`;
  const admin = new pg.Client({ connectionString: maintenance.toString() });
  try {
    await admin.connect();
    await admin.query(`create database "${name.replaceAll('"', '""')}"`);
  } catch (err) {
    if (pgErrorCode(err) === DUPLICATE_DATABASE) return;
    throw new Error(
      `database "${name}" (DATABASE_URL) does not exist and could not be created through the "postgres" database (${(err as Error).message}): ${how}`,
      { cause: err },
    );
  } finally {
    await admin.end().catch(() => undefined);
  }
}
