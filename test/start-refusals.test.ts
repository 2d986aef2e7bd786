// Issue 42 point 8 (DESIGN §16): a start the operator's settings make impossible is refused in one line
// that names the setting, exit 1, before any database is made — not a stack trace seconds later.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { TEST_ENCRYPTION_KEYS } from './helpers/app.ts';
import { runToEnd } from './helpers/server-process.ts';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'advisor-refusal-'));
  dirs.push(d);
  return d;
}

/** The server started with `extra`, to its end: its exit code, its stderr lines (JSON log lines left out) and what it left in DATA_DIR. */
async function start(extra: Record<string, string>): Promise<{ code: number | null; lines: string[]; left: string[] }> {
  const dir = dataDir();
  const r = await runToEnd(['src/server.ts'], { PATH: process.env.PATH ?? '', DATA_DIR: dir, LOG_LEVEL: 'warn', PORT: '0', ...extra });
  return { code: r.code, lines: r.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('{')), left: readdirSync(dir) };
}

/** A loopback port nothing listens on (taken from the system, then closed). */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

const onPostgres = { ENCRYPTION_KEYS: TEST_ENCRYPTION_KEYS, AUTH_JWT_SECRET: 'x'.repeat(40) };

describe('start refusals (issue 42 point 8)', () => {
  test('a malformed ENCRYPTION_KEYS (not ID:KEY; a 5-byte key) → exit 1, one line naming ENCRYPTION_KEYS, nothing written to DATA_DIR', async () => {
    for (const keys of ['abc', `k1:${Buffer.alloc(5, 1).toString('base64')}`]) {
      const r = await start({ ENCRYPTION_KEYS: keys });
      assert.equal(r.code, 1);
      assert.equal(r.lines[0], 'Invalid configuration:');
      assert.equal(r.lines.length, 2, r.lines.join('\n'));
      assert.match(r.lines[1] ?? '', /^ {2}- ENCRYPTION_KEYS entry 1 /);
      assert.deepEqual(r.left, []);
    }
  });

  test('a DATABASE_URL whose server is not running → exit 1, one line naming DATABASE_URL with host, port and database (no password)', async () => {
    const port = await closedPort();
    const r = await start({ ...onPostgres, DATABASE_URL: `postgres://app:secret@127.0.0.1:${port}/journal` });
    assert.equal(r.code, 1);
    assert.deepEqual(r.lines, [
      `Cannot use DATABASE_URL (127.0.0.1:${port}/journal): it names a server that is not running there (nothing listens on that host and port) ` +
        `(connect ECONNREFUSED 127.0.0.1:${port}).`,
    ]);
  });

  test('a PORT in use is refused before the embedded database is made (DATA_DIR left empty)', async () => {
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = busy.address() as net.AddressInfo;
      const r = await start({ PORT: String(port), HOST: '127.0.0.1' });
      assert.equal(r.code, 1);
      assert.deepEqual(r.lines, [
        `Cannot listen on HOST 127.0.0.1 PORT ${port}: the address is already in use (another process listens there): stop it or set PORT to a free port.`,
      ]);
      assert.deepEqual(r.left, []);
    } finally {
      await new Promise((resolve) => busy.close(resolve));
    }
  });
});

describe('the production start (issue 42 point 2)', () => {
  test('a SIGTERM to `npm start` (what kill, a supervisor or `docker stop` sends to its main PID) reaches the server: it drains, logs "stopped" and exits', async () => {
    const dir = dataDir();
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: path.resolve(import.meta.dirname, '..'),
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout.on('data', (c: Buffer) => (out += c.toString()));
    npm.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const look = (): void => {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m?.[1] !== undefined) resolve(m[1]);
      };
      npm.stdout.on('data', look);
      npm.once('exit', () => reject(new Error(`npm start ended before listening:\n${out}`)));
    });
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
    const exited = once(npm, 'exit');
    npm.kill('SIGTERM');
    await exited;
    assert.match(out, /"msg":"draining"/);
    assert.match(out, /"msg":"stopped"/);
    await assert.rejects(fetch(`${url}/readyz`), 'nothing listens after the stop');
  });
});
