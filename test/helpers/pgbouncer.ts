// Debian's PgBouncer in transaction mode in front of the suites' PostgreSQL (DESIGN §15): a process of
// its own on a free port, with its own configuration in a temporary directory.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { endChild } from './child.ts';
import { unusedPort, waitForPort } from './net.ts';

export interface PgBouncer {
  /** `postgres://user@127.0.0.1:<port>/` — append a database name. */
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Any database of `databaseUrl`'s server, through PgBouncer (`*` routes each database name to the same
 * name there), pool_mode = transaction: a server connection belongs to a client for one transaction
 * only, so nothing a session sets survives it. Clients log in as `databaseUrl`'s user without a
 * password (auth_type trust); PgBouncer logs in to PostgreSQL with that user's password, if any.
 * PgBouncer refuses to run as root: as root it is told to switch to `nobody`.
 */
export async function startPgBouncer(databaseUrl: string): Promise<PgBouncer> {
  const server = new URL(databaseUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const port = await unusedPort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'advisor-pgbouncer-'));
  // Read by PgBouncer after it has switched to `nobody`.
  chmodSync(dir, 0o755);
  const ini = path.join(dir, 'pgbouncer.ini');
  const users = path.join(dir, 'users.txt');
  writeFileSync(users, `"${user.replaceAll('"', '""')}" "${password.replaceAll('"', '""')}"\n`, { mode: 0o644 });
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${users}`,
      'pool_mode = transaction',
      'max_client_conn = 1000',
      // Fewer server connections than the instances' pools hold together (3 × 8, test/cluster/cluster.ts): they wait their turn.
      'default_pool_size = 10',
      'server_login_retry = 1',
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const args = [...(process.getuid?.() === 0 ? ['-u', 'nobody'] : []), ini];
  const child: ChildProcess = spawn('pgbouncer', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  let spawnError: Error | undefined;
  child.on('error', (err) => (spawnError = err));
  const stop = async (): Promise<void> => {
    await endChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort(port);
  } catch (err) {
    await stop();
    throw spawnError ?? new Error(`PgBouncer did not start: ${stderr}`, { cause: err });
  }
  return { url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/`, stop };
}
