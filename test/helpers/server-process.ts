// The real entry point as a process, as `npm start` runs it, for the tests of the start itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');

/** A fresh embedded data directory is migrated at the start: seconds when idle, far more on a loaded 2-core machine. */
const START_BOUND_MS = 90_000;

/**
 * V8 flags of the processes these tests start (as `npm test` gives its own, package.json): PGlite's
 * 9 MB WebAssembly module stays on V8's baseline compiler instead of being optimised in the
 * background, which on a 2-core machine costs more CPU than a short-lived process ever wins back.
 * They change how fast the code runs, never what it does.
 */
const TEST_NODE_FLAGS = ['--liftoff-only'];

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Everything it printed up to its banner. */
  readonly banner: string;
}

/**
 * Starts `node src/server.ts` with exactly `env` and resolves once its banner is printed; a start
 * that exits, or prints no banner within START_BOUND_MS (only a hang: it is killed), fails.
 */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...TEST_NODE_FLAGS, 'src/server.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no banner in: ${out}`));
    }, START_BOUND_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)[\s\S]*Mint a token:.*\n/.exec(out);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}: ${out}`));
    });
  });
  return { child, url, banner: out };
}

/** Runs a node entry point of the project (`args`: the script and its arguments) with exactly `env`, to its end. */
export async function runToEnd(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...TEST_NODE_FLAGS, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
