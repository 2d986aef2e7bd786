// Debian's nginx with the project's configuration (deploy/nginx.conf) in front of a set of instances
// (DESIGN §15): a process of the test's own, on a free port, its prefix and pid file in a temporary
// directory, stopped with the test.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { endChild } from './child.ts';
import { unusedPort, waitForPort } from './net.ts';

const TEMPLATE = path.resolve(import.meta.dirname, '../../deploy/nginx.conf');

/** The nginx binary (Debian puts it in /usr/sbin, not always on a test's PATH); undefined when absent. */
export const NGINX = ['nginx', '/usr/sbin/nginx'].find((bin) => spawnSync(bin, ['-v']).status === 0);

export interface Nginx {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * deploy/nginx.conf filled with a free loopback port and `upstreams` (`http://host:port` each), running in
 * the foreground. A port found free can be taken before nginx binds it (other suites start servers beside
 * this one): then another port is tried.
 */
export async function startNginx(upstreams: readonly string[]): Promise<Nginx> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNginxOnce(upstreams);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof Error) || !err.message.includes('Address already in use')) throw err;
    }
  }
}

async function startNginxOnce(upstreams: readonly string[]): Promise<Nginx> {
  if (!NGINX) throw new Error('nginx is not installed (apt-get install nginx)');
  const port = await unusedPort();
  const prefix = mkdtempSync(path.join(os.tmpdir(), 'advisor-nginx-'));
  const conf = path.join(prefix, 'nginx.conf');
  // Each instance as deploy/nginx.conf tells an operator to list it.
  const servers = upstreams.map((u) => `server ${new URL(u).host} max_fails=1 fail_timeout=5s;`).join('\n    ');
  // The placeholders where they stand alone (the template's comment names them too).
  const filled = readFileSync(TEMPLATE, 'utf8')
    .replace(/^(\s*listen )\{\{LISTEN\}\};$/m, `$1127.0.0.1:${port};`)
    .replace(/^(\s*)\{\{UPSTREAMS\}\}$/m, `$1${servers}`);
  writeFileSync(conf, filled);
  const child = spawn(NGINX, ['-c', conf, '-p', `${prefix}/`, '-e', 'stderr', '-g', `daemon off; pid ${path.join(prefix, 'nginx.pid')};`], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const stop = async (): Promise<void> => {
    // The master stops its workers, then exits.
    await endChild(child, 'SIGTERM');
    rmSync(prefix, { recursive: true, force: true });
  };
  const exited = once(child, 'exit').then(() => {
    throw new Error('nginx exited');
  });
  exited.catch(() => undefined);
  try {
    await Promise.race([waitForPort(port), exited]);
  } catch (err) {
    await stop();
    throw new Error(`nginx did not start: ${stderr}`, { cause: err });
  }
  return { url: `http://127.0.0.1:${port}`, port, stop };
}
