import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DATA_DIR_LOCK_FILE, DataDirLockedError, FOREIGN_LOCK_STALE_MS, lockDataDir, type LockHolder } from './data-dir-lock.ts';

const MODULE = path.join(import.meta.dirname, 'data-dir-lock.ts');

function scratch(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'advisor-lock-'));
}

/** What this process writes as a holder, with some fields replaced: a lock another process could have left. */
function holderLike(dir: string, change: Partial<LockHolder>): void {
  const elsewhere = scratch();
  const lock = lockDataDir(elsewhere);
  const mine = JSON.parse(readFileSync(lock.file, 'utf8')) as LockHolder;
  lock.release();
  rmSync(elsewhere, { recursive: true, force: true });
  writeFileSync(path.join(dir, DATA_DIR_LOCK_FILE), `${JSON.stringify({ ...mine, nonce: 'left-behind', ...change })}\n`);
}

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

/** /proc start time of a pid (Linux), as the lock records it. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

describe('DATA_DIR lock (DESIGN §10: one process per embedded data directory)', () => {
  test('DESIGN §10: a held DATA_DIR refuses a second lock, naming the directory and the holder (pid, command); released, it is free again', () => {
    const dir = scratch();
    try {
      const first = lockDataDir(dir);
      const refused = (() => {
        try {
          lockDataDir(dir);
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      assert.ok(refused instanceof DataDirLockedError);
      assert.equal(refused.holder.pid, process.pid);
      assert.match(refused.message, new RegExp(`DATA_DIR ${dir} is in use by process ${process.pid} \\(node `));
      first.release();
      assert.equal(existsSync(first.file), false);
      lockDataDir(dir).release();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('DESIGN §10: a lock whose process is gone (kill -9: pid not alive) is taken over', () => {
    const dir = scratch();
    try {
      holderLike(dir, { pid: deadPid() });
      const lock = lockDataDir(dir);
      assert.equal((JSON.parse(readFileSync(lock.file, 'utf8')) as LockHolder).pid, process.pid);
      lock.release();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('DESIGN §10: a lock naming a live pid is taken over only when that pid now belongs to a process started at another time', async (t) => {
    if (processStart(process.pid) === undefined) return t.skip('needs /proc (Linux)');
    const dir = scratch();
    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      await once(sleeper, 'spawn');
      const pid = sleeper.pid ?? 0;
      holderLike(dir, { pid, processStart: processStart(pid) ?? '' });
      assert.throws(() => lockDataDir(dir), DataDirLockedError);
      holderLike(dir, { pid, processStart: '1' });
      lockDataDir(dir).release();
      // Our own pid in a lock we do not hold: the process that ran before us under this pid.
      holderLike(dir, { pid: process.pid, processStart: '1' });
      lockDataDir(dir).release();
    } finally {
      sleeper.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`DESIGN §10: a lock from another machine or container is refused while its holder keeps it fresh, taken over ${FOREIGN_LOCK_STALE_MS / 1000} s after its last heartbeat`, () => {
    const dir = scratch();
    try {
      holderLike(dir, { host: 'another-host', pid: 7 });
      assert.throws(
        () => lockDataDir(dir),
        (err: unknown) =>
          err instanceof DataDirLockedError &&
          /process 7 on host another-host .*last refreshed the lock \d+ s ago; the lock is taken over 30 s after that/.test(err.message),
      );
      const old = new Date(Date.now() - FOREIGN_LOCK_STALE_MS - 1000);
      utimesSync(path.join(dir, DATA_DIR_LOCK_FILE), old, old);
      lockDataDir(dir).release();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('DESIGN §10: processes racing for stale locks: each lock is taken by exactly one, the others are refused; an exit removes the locks it held', async () => {
    const root = scratch();
    try {
      // 200 directories, each with a lock its process left behind; six processes walk them in the same
      // order from one instant (a busy wait to a shared moment), so they meet on the same stale locks.
      const dirs = Array.from({ length: 200 }, (_, i) => path.join(root, String(i)));
      const gone = deadPid();
      for (const dir of dirs) {
        mkdirSync(dir);
        holderLike(dir, { pid: gone });
      }
      const at = Date.now() + 3000;
      const script = [
        `import { lockDataDir } from ${JSON.stringify(MODULE)};`,
        'process.setMaxListeners(0);',
        `const dirs = ${JSON.stringify(dirs)};`,
        'const took = [];',
        `while (Date.now() < ${at});`,
        'for (const [i, dir] of dirs.entries()) {',
        '  try { lockDataDir(dir); took.push(i); }',
        "  catch (err) { if (err.name !== 'DataDirLockedError') throw err; }",
        '}',
        'process.stdout.write(`${JSON.stringify(took)}\\n`);',
        // Held until every process has walked them all (its exit would free them for a slower one).
        'process.stdin.resume();',
        "await new Promise((r) => process.stdin.on('end', r));",
      ].join('\n');
      const children = Array.from({ length: 6 }, () => spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] }));
      const taken = await Promise.all(
        children.map(async (child) => {
          let out = '';
          for await (const chunk of child.stdout) {
            out += String(chunk);
            if (out.endsWith('\n')) break;
          }
          return JSON.parse(out) as number[];
        }),
      );
      for (const child of children) child.stdin.end();
      for (const child of children) assert.equal(child.exitCode ?? (await once(child, 'exit'))[0], 0);
      const takers = dirs.map((_, i) => taken.filter((t) => t.includes(i)).length);
      assert.deepEqual(
        takers.filter((n) => n !== 1),
        [],
        `locks taken by several processes or none: ${JSON.stringify(takers)}`,
      );
      for (const dir of dirs) assert.equal(existsSync(path.join(dir, DATA_DIR_LOCK_FILE)), false, dir);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
