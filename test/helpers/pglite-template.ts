import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { createDb, type DbHandle, type PgliteStart } from '../../src/db/create-db.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { PGliteDialect } from '../../src/db/pglite-dialect.ts';
import type { DB } from '../../src/db/types.ts';

/**
 * What every embedded test database starts from: PGlite's compiled modules, compiled once per test
 * process, and a data directory with every migration applied. A new embedded database otherwise
 * runs initdb (PGlite starts a second instance for it) and then every migration: about 3.4 s of CPU
 * per test app on a 2-core machine, against about 0.3 s to load the dump (below) with fewer shared buffers. The dump is made once and
 * kept in `node_modules/.cache/advisor-tests/`, named by the hash of PGlite's version and the
 * migrations' sources, so an edited migration makes a new one; test processes share it (written to
 * a temporary name and renamed, so a reader never sees half of one).
 *
 * Only the test apps start from it: the suites that test migrating, a newcomer's first start or a
 * DATA_DIR on disk create their databases the way the service does.
 */
export function pgliteTemplate(): Promise<PgliteStart> {
  return (template ??= load());
}

let template: Promise<PgliteStart> | undefined;

/** PGlite's own start parameters (its static `defaultStartParams`, not in its types). */
const PGLITE_START_PARAMS = (PGlite as unknown as { defaultStartParams: string[] }).defaultStartParams;

/** Node's WebAssembly global (@types/node, at the version this project uses, does not declare it). */
const { WebAssembly: wasm } = globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<NonNullable<PgliteStart['pgliteWasmModule']>> } };

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIST = path.dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite')));

async function load(): Promise<PgliteStart> {
  const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
    wasm.compile(readFileSync(path.join(DIST, 'pglite.wasm'))),
    wasm.compile(readFileSync(path.join(DIST, 'initdb.wasm'))),
  ]);
  const modules: PgliteStart = { pgliteWasmModule, initdbWasmModule, fsBundle: new Blob([readFileSync(path.join(DIST, 'pglite.data'))]) };
  const file = path.join(ROOT, 'node_modules', '.cache', 'advisor-tests', `pglite-${sourceHash()}.tar`);
  let dump: Buffer;
  try {
    dump = readFileSync(file);
  } catch {
    dump = await migratedDump(modules);
    const dir = path.dirname(file);
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, dump);
    renameSync(partial, file);
    // Dumps of earlier migrations are never read again.
    for (const old of readdirSync(dir)) if (/^pglite-[0-9a-f]+\.tar$/.test(old) && old !== path.basename(file)) rmSync(path.join(dir, old), { force: true });
  }
  // A test database holds a few pages: PostgreSQL's 128 MB of shared buffers would take ~0.45 s of
  // each start to set up.
  const startParams = [...PGLITE_START_PARAMS, '-c', 'shared_buffers=16MB'];
  return { ...modules, startParams, loadDataDir: new Blob([new Uint8Array(dump)]) };
}

/** PGlite's version, every migration source and this file: what the dump's contents follow from. */
function sourceHash(): string {
  const hash = createHash('sha256');
  hash.update(readFileSync(path.join(DIST, '..', 'package.json')));
  const dir = path.join(ROOT, 'src', 'db');
  const files = [
    fileURLToPath(import.meta.url),
    path.join(dir, 'migrate.ts'),
    ...readdirSync(path.join(dir, 'migrations'))
      .sort()
      .map((f) => path.join(dir, 'migrations', f)),
  ];
  for (const f of files) hash.update(f.slice(ROOT.length)).update(readFileSync(f));
  return hash.digest('hex').slice(0, 16);
}

/**
 * The migrated cluster, made as small as it can validly be, since every test app start copies it a
 * few times: WAL segments of 1 MB (initdb's default 16 MB segment is mostly zeros), and no template
 * databases (nothing in a test creates a database): 15 MB against 42 MB, loaded in half the time.
 */
async function migratedDump(modules: PgliteStart): Promise<Buffer> {
  const lite = new PGlite('memory://', { ...modules, initDbStartParams: ['--wal-segsize=1'] });
  const db = new Kysely<DB>({ dialect: new PGliteDialect(lite) });
  try {
    await migrateToLatest(db);
    for (const template of ['template0', 'template1']) {
      await lite.exec(`alter database ${template} is_template false`);
      await lite.exec(`drop database ${template}`);
    }
    await lite.exec('checkpoint');
    const dump = await lite.dumpDataDir('none');
    return Buffer.from(await dump.arrayBuffer());
  } finally {
    await db.destroy();
  }
}

/** A throwaway embedded database with every migration applied, from the template. */
export async function migratedEmbeddedDb(): Promise<DbHandle> {
  return createDb({ pgliteDir: 'memory://', pgliteStart: await pgliteTemplate() });
}
