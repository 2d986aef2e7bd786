import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { startServerProcess, type ServerProcess } from './helpers/server-process.ts';

const root = path.resolve(import.meta.dirname, '..');

/** Starts the real entry point with no configuration but a data directory, like `npm start`. */
const start = (dataDir: string): Promise<ServerProcess> =>
  startServerProcess({ PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn' });

async function token(dataDir: string, user: string): Promise<string> {
  const child = spawn(process.execPath, ['scripts/token.ts', user], { cwd: root, env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir } });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
  return out.trim();
}

describe('server process', () => {
  test('DESIGN §1: starts with no environment on the embedded default; secrets generated 0600; a restart keeps all data; SIGTERM exits 0', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-server-'));
    try {
      let { child, url } = await start(dataDir);
      for (const f of ['encryption-keys', 'jwt-secret']) assert.equal(statSync(path.join(dataDir, f)).mode & 0o777, 0o600, f);
      const auth = { authorization: `Bearer ${await token(dataDir, 'alice')}`, 'content-type': 'application/json' };
      const created = await fetch(`${url}/api/accounts`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name: 'Kept', currency: 'USD', timezone: 'UTC', startingBalance: '1' }),
      });
      assert.equal(created.status, 201);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);

      ({ child, url } = await start(dataDir));
      const list = (await (await fetch(`${url}/api/accounts`, { headers: auth })).json()) as { items: { name: string }[] };
      assert.deepEqual(
        list.items.map((a) => a.name),
        ['Kept'],
      );
      child.kill('SIGTERM');
      assert.equal((await once(child, 'exit'))[0], 0);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('issue 18: `npm start` serves the web client at / (strict CSP) and, on the embedded default on loopback, its local sign-in', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-server-'));
    try {
      const { child, url } = await start(dataDir);
      const page = await fetch(`${url}/`);
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
      assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
      assert.match(await page.text(), /<script type="module" crossorigin src="\/assets\/index-[\w-]+\.js"><\/script>/);
      const session = await fetch(`${url}/api/local-sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userId: 'local-alice' }),
      });
      assert.equal(session.status, 200);
      const { token: minted } = (await session.json()) as { token: string };
      assert.equal((await fetch(`${url}/api/accounts`, { headers: { authorization: `Bearer ${minted}` } })).status, 200);
      child.kill('SIGTERM');
      assert.equal((await once(child, 'exit'))[0], 0);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
