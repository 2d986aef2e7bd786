// What every scenario gets: the run's stores, the fake upstream process, and starters for the
// service (`node src/server.ts`, as production starts it) and the baselines, each its own process.
import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { StreamScript } from '../../test/fakes/index.ts';
import { mintToken } from '../../src/http/auth.ts';
import { TEST_ENCRYPTION_KEYS, TEST_JWT_SECRET } from '../../test/helpers/app.ts';
import type { ScriptMessage } from './fake-upstream.ts';
import { ask, ROOT, type Proc, type Procs } from './procs.ts';
import type { Stores } from './stores.ts';

export interface Harness {
  readonly procs: Procs;
  readonly stores: Stores;
  readonly quick: boolean;
  /** Directory for this run's logs and profiles. */
  readonly dir: string;
  /** The fake's base URL with its version segment (…/v1). */
  readonly fakeUrl: string;
  readonly fake: Proc;
  /** Every later stream request to the fake plays this. */
  script(s: StreamScript): Promise<void>;
  /** The next stream requests play these, once each, in order (then the script again). */
  enqueue(scripts: readonly StreamScript[]): Promise<void>;
  startService(name: string, env?: Record<string, string>, nodeArgs?: readonly string[]): Promise<Proc>;
  startProxy(name: string): Promise<Proc>;
  /** The floor of a turn (bench/lib/turn-floor.ts) on the service's stores, with the service's node flags. */
  startFloor(name: string): Promise<Proc>;
  token(userId: string): Promise<string>;
}

export interface HarnessOptions {
  readonly dir: string;
  readonly quick: boolean;
  readonly profile: boolean;
  /** Another checkout of the service to measure (a candidate change), instead of this one. */
  readonly serviceRoot?: string | undefined;
}

export async function createHarness(procs: Procs, stores: Stores, opts: HarnessOptions): Promise<Harness> {
  const fake = await procs.startNode('fake-upstream', 'bench/lib/fake-upstream.ts', { env: baseEnv(), ipc: true });
  const fakeUrl = fake.ready;
  const send = (m: Omit<ScriptMessage, 'id'>): Promise<void> => ask<unknown>(fake, m).then(() => undefined);
  // The service (and the floor) run with the node flags of the service's own `npm start` (heap settings),
  // then any asked for; when profiling, each process's profile is named after it.
  let profiles = 0;
  const serviceNodeArgs = (name: string): string[] => [
    ...startScriptFlags(opts.serviceRoot ?? ROOT),
    ...(opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(opts.dir, 'profiles')}`, `--cpu-prof-name=${++profiles}-${name}.cpuprofile`] : []),
    ...(process.env.BENCH_SERVICE_NODE_FLAGS ?? '').split(' ').filter(Boolean),
  ];
  /** What a process on the service's stores is started with (the service's and the floor's). */
  const storesEnv = (name: string): Record<string, string> => ({
    ...baseEnv(),
    // Unused with DATABASE_URL and the secrets given, but the service wants one; removed with the run's directory.
    DATA_DIR: mkdtempSync(path.join(opts.dir, `data-${name}-`)),
    DATABASE_URL: stores.databaseUrl,
    REDIS_URL: stores.redisUrl,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    ENCRYPTION_KEYS: TEST_ENCRYPTION_KEYS,
    OPENAI_BASE_URL: fakeUrl,
  });
  return {
    procs,
    stores,
    quick: opts.quick,
    dir: opts.dir,
    fake,
    fakeUrl,
    script: (script) => send({ script }),
    enqueue: (queue) => send({ queue }),
    startService(name, env = {}, nodeArgs = []) {
      return procs.startNode(name, path.join(opts.serviceRoot ?? ROOT, 'src', 'server.ts'), {
        nodeArgs: [...serviceNodeArgs(name), ...nodeArgs],
        env: {
          ...storesEnv(name),
          PORT: '0',
          HOST: '127.0.0.1',
          // Production's default level: the service pays for its own request logs here too.
          LOG_LEVEL: process.env.BENCH_SERVICE_LOG_LEVEL ?? 'info',
          SHUTDOWN_DRAIN_MS: '1000',
          ...env,
        },
      });
    },
    startFloor(name) {
      return procs.startNode(name, 'bench/lib/turn-floor.ts', { nodeArgs: serviceNodeArgs(name), env: storesEnv(name) });
    },
    startProxy(name) {
      return procs.startNode(name, 'bench/lib/bare-proxy.ts', { env: { ...baseEnv(), UPSTREAM_URL: fakeUrl, UPSTREAM_KEY: 'sk-valid-openai' } });
    },
    token: (userId) => mintToken(TEST_JWT_SECRET, userId, { tier: 'pro', ttlSeconds: 4 * 3600 }),
  };
}

function baseEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '', NODE_ENV: 'production' };
}

/** A keep-alive agent for stream clients; `maxSockets` bounds the connections to one target. */
export function streamAgent(maxSockets: number): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

/** The node flags of a checkout's `npm start` script (`node --flag … src/server.ts`). */
export function startScriptFlags(root: string): string[] {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts?: { start?: string } };
  // `exec node …`: the shell npm runs the script in becomes node, so a signal to npm reaches it.
  const words = (pkg.scripts?.start ?? '').replace(/^exec\s+/, '').split(/\s+/);
  return words[0] === 'node' ? words.slice(1).filter((w) => w.startsWith('--')) : [];
}
