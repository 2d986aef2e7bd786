// The nemesis's own PostgreSQL cluster (initdb into a temporary directory, pg_ctl on a free port), so
// that "PostgreSQL restarted" and "connections exhausted" never touch the shared server. As root,
// initdb refuses to run: the cluster is then made and run as the `postgres` user (runuser). Without
// initdb, or when that fails, a fresh database on NEMESIS_FALLBACK_DATABASE_URL (the shared server)
// is used and the faults that need the cluster are skipped (and said to be).
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { unusedPort } from '../helpers/net.ts';

const run = promisify(execFile);
const BIN = process.env.NEMESIS_PG_BIN ?? '/usr/lib/postgresql/15/bin';
/** Small, so that "connections exhausted" takes few connections (the instances' pools fit well under it). */
export const OWN_MAX_CONNECTIONS = 80;

export interface OwnPostgres {
  /** Superuser URL on the `postgres` database: startCluster creates the service's database through it. */
  readonly adminUrl: string;
  /** False on the shared server: no restart, no connection exhaustion. */
  readonly owned: boolean;
  /** Stops at once (as a crash would: `-m immediate`) and starts again on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startOwnPostgres(log: (line: string) => void): Promise<OwnPostgres> {
  try {
    return await ownCluster();
  } catch (err) {
    const fallback = process.env.NEMESIS_FALLBACK_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    log(
      `own PostgreSQL cluster not possible (${(err as Error).message.split('\n')[0]}): using ${fallback}; "PostgreSQL restarted" and "connections exhausted" are SKIPPED`,
    );
    return {
      adminUrl: fallback,
      owned: false,
      restart: async () => undefined,
      stop: async () => undefined,
    };
  }
}

async function ownCluster(): Promise<OwnPostgres> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'advisor-nemesis-pg-'));
  const dataDir = path.join(root, 'data');
  const asRoot = process.getuid?.() === 0;
  const as = async (cmd: string, args: string[]): Promise<void> => {
    const bin = path.join(BIN, cmd);
    if (asRoot) await run('runuser', ['-u', 'postgres', '--', bin, ...args], { timeout: 120_000 });
    else await run(bin, args, { timeout: 120_000 });
  };
  let port = 0;
  // fsync off only matters if the machine itself crashes; synchronous_commit stays on, so a commit the
  // service was told of survives "PostgreSQL restarted" (an immediate stop: a crash).
  const options = (): string =>
    [`-p ${port}`, `-k ${root}`, '-c listen_addresses=127.0.0.1', `-c max_connections=${OWN_MAX_CONNECTIONS}`, '-c fsync=off', '-c shared_buffers=32MB'].join(
      ' ',
    );
  const start = (): Promise<void> => as('pg_ctl', ['-D', dataDir, '-o', options(), '-l', path.join(root, 'log'), '-w', '-t', '120', 'start']);
  const stopNow = (mode: string): Promise<void> => as('pg_ctl', ['-D', dataDir, '-m', mode, '-w', '-t', '120', 'stop']);
  try {
    if (asRoot) {
      const { stdout: uid } = await run('id', ['-u', 'postgres']);
      const { stdout: gid } = await run('id', ['-g', 'postgres']);
      chownSync(root, Number(uid.trim()), Number(gid.trim()));
      chmodSync(root, 0o700);
    }
    await as('initdb', ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    // A port found free can be taken before the server binds it (other suites start servers too): another one then.
    for (let attempt = 1; ; attempt++) {
      port = await unusedPort();
      try {
        await start();
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
    // Reachable over TCP before anything is built on it.
    const probe = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/postgres` });
    await probe.connect();
    await probe.end();
  } catch (err) {
    await stopNow('immediate').catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
  return {
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    owned: true,
    async restart() {
      await stopNow('immediate');
      await start();
    },
    async stop() {
      await stopNow('immediate').catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
