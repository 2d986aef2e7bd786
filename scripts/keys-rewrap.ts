// Re-encrypts every stored key under the first key of ENCRYPTION_KEYS (DESIGN §5):
//   ENCRYPTION_KEYS=new:…,old:… npm run keys:rewrap
// Idempotent: rows already under the first key are left alone, so a second run changes nothing.
import { ConfigError, loadConfig } from '../src/config.ts';
import { createDb } from '../src/db/create-db.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createVault, loadOrCreateKeyring } from '../src/platform/aes-vault.ts';
import path from 'node:path';
import { rewrapAllKeys } from '../src/features/advisor-keys/rewrap.ts';
import { DataDirLockedError } from '../src/platform/data-dir-lock.ts';

/** A refusal the operator fixes (a setting, a server holding DATA_DIR): its message, exit 1. */
function refused(err: unknown): never {
  if (!(err instanceof ConfigError || err instanceof DataDirLockedError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}

let config;
try {
  config = loadConfig(process.env);
} catch (err) {
  refused(err);
}
let handle;
try {
  handle = await createDb({
    databaseUrl: config.databaseUrl,
    preparedStatements: config.databasePreparedStatements,
    pgliteDir: path.join(config.dataDir, 'pgdata'),
  });
} catch (err) {
  refused(err);
}
const vault = createVault(loadOrCreateKeyring(config.encryptionKeys, config.dataDir, (m) => process.stderr.write(`${m}\n`)));
try {
  await migrateToLatest(handle.db);
  const report = await rewrapAllKeys({ db: handle.db, vault });
  const line = (name: string, c: { rewrapped: number; alreadyCurrent: number; failed: number }) =>
    `${name}: ${c.rewrapped} rewrapped, ${c.alreadyCurrent} already under "${report.primaryKeyId}", ${c.failed} failed\n`;
  process.stdout.write(line('provider keys', report.providerKeys));
  process.stdout.write(line('market-data keys', report.marketDataKeys));
  for (const f of report.failures) {
    process.stderr.write(`cannot decrypt ${f.table} user=${f.userId} provider=${f.provider}: its key id is not in ENCRYPTION_KEYS or the row was altered\n`);
  }
  process.exitCode = report.failures.length > 0 ? 1 : 0;
} finally {
  await handle.close();
}
