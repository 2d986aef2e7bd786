// Real processes on one embedded DATA_DIR: the server started as `npm start` starts it, and the
// operator scripts beside it (DESIGN §10: one process per embedded data directory), and the start's
// messages a newcomer meets first (issue 26).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DATA_DIR_LOCK_FILE } from '../src/platform/data-dir-lock.ts';
import { runToEnd, startServerProcess, type ServerProcess } from './helpers/server-process.ts';

type Server = ServerProcess;

/** `node src/server.ts` on the embedded default in `dataDir`, like `npm start`. */
const start = (dataDir: string): Promise<Server> => startServerProcess(env(dataDir, { PORT: '0' }));

function env(dataDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...extra };
}

/** Runs a node entry point of the project to its end. */
const run = (args: string[], environment: Record<string, string>): ReturnType<typeof runToEnd> => runToEnd(args, environment);

async function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill(signal);
  return ((await once(child, 'exit')) as [number | null])[0];
}

describe('one process per embedded DATA_DIR, and the start a newcomer meets (DESIGN §10, issue 26)', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-data-dir-'));
  const lockFile = path.join(dataDir, DATA_DIR_LOCK_FILE);
  let server: Server | undefined;
  const running = (): Server => {
    assert.ok(server, 'the server did not start');
    return server;
  };
  /** What a refusal must name: DATA_DIR, and the process holding it (pid, and how it was started). */
  let holder: RegExp;

  before(async () => {
    const first = await start(dataDir);
    server = first;
    holder = new RegExp(`DATA_DIR ${dataDir} is in use by process ${first.child.pid} \\(node src/server\\.ts, started `);
  });
  after(async () => {
    if (server) await stop(server.child, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('issue 26: the start banner prints the token command for its own DATA_DIR, and the token that command mints is accepted', async () => {
    const command = /Mint a token: +(\S.*?npm run -s token -- <userId>)/.exec(running().banner)?.[1];
    assert.equal(command, `DATA_DIR=${dataDir} npm run -s token -- <userId>`);
    const minted = await run(['scripts/token.ts', 'alice'], env(dataDir));
    assert.equal(minted.code, 0, minted.stderr);
    const res = await fetch(`${running().url}/api/accounts`, { headers: { authorization: `Bearer ${minted.stdout.trim()}` } });
    assert.equal(res.status, 200);
  });

  test('DESIGN §10: `npm run admin` on a DATA_DIR a server holds refuses: exit 1, naming DATA_DIR and the holder (pid, command); nothing written', async () => {
    const admin = await run(['scripts/admin.ts', 'grant', 'carol', '100', '--reason', 'while the server runs'], env(dataDir));
    assert.equal(admin.code, 1);
    assert.match(admin.stderr, holder);
    assert.equal(admin.stdout, '');
  });

  test('DESIGN §10: a second `npm start` on the same DATA_DIR refuses (exit 1) naming DATA_DIR and the holder; the first keeps serving', async () => {
    const second = await run(['src/server.ts'], env(dataDir, { PORT: '0' }));
    assert.equal(second.code, 1);
    assert.match(second.stderr, holder);
    assert.doesNotMatch(second.stdout, /listening/);
    assert.equal((await fetch(`${running().url}/readyz`)).status, 200);
  });

  test('DESIGN §10: `npm run keys:rewrap` on a DATA_DIR a server holds refuses (exit 1) naming DATA_DIR and the holder', async () => {
    const rewrap = await run(['scripts/keys-rewrap.ts'], env(dataDir));
    assert.equal(rewrap.code, 1);
    assert.match(rewrap.stderr, holder);
  });

  test('issue 26: a PORT already in use stops the start with one line naming HOST and PORT (exit 1, no stack trace), and frees its DATA_DIR', async () => {
    const other = mkdtempSync(path.join(os.tmpdir(), 'advisor-data-dir-'));
    try {
      const port = new URL(running().url).port;
      const clash = await run(['src/server.ts'], env(other, { PORT: port }));
      assert.equal(clash.code, 1);
      const lines = clash.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('{'));
      assert.deepEqual(lines, [
        `Cannot listen on HOST 127.0.0.1 PORT ${port}: the address is already in use (another process listens there): stop it or set PORT to a free port.`,
      ]);
      assert.equal(existsSync(path.join(other, DATA_DIR_LOCK_FILE)), false);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  test('DESIGN §10: once the server exits (SIGTERM) its lock is gone, the admin tool runs, and the next start sees what it wrote', async () => {
    assert.equal(await stop(running().child), 0);
    assert.equal(existsSync(lockFile), false);
    const admin = await run(['scripts/admin.ts', 'grant', 'carol', '100', '--reason', 'server stopped'], env(dataDir));
    assert.equal(admin.code, 0, admin.stderr);
    assert.match(admin.stdout, /carol: granted 100 credits/);
    server = await start(dataDir);
    const token = (await run(['scripts/token.ts', 'carol'], env(dataDir))).stdout.trim();
    const wallet = (await (await fetch(`${running().url}/api/billing/wallet`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      credits: number;
    };
    assert.equal(wallet.credits, 100);
  });

  test('DESIGN §10: a server killed with SIGKILL leaves its lock behind, and the next process takes it over (the pid is gone)', async () => {
    await stop(running().child, 'SIGKILL');
    assert.equal(existsSync(lockFile), true);
    const admin = await run(['scripts/admin.ts', 'grant', 'carol', '5', '--reason', 'after a crash'], env(dataDir));
    assert.equal(admin.code, 0, admin.stderr);
    assert.match(admin.stdout, /balance 105/);
    assert.equal(existsSync(lockFile), false);
  });
});
