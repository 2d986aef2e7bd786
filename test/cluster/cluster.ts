import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { mintToken } from '../../src/http/auth.ts';
import { TEST_ENCRYPTION_KEYS, TEST_JWT_SECRET } from '../helpers/app.ts';
import { ensureDatabase } from '../helpers/database.ts';
import { TcpProxy } from '../helpers/net.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/own-redis.ts';

const root = path.resolve(import.meta.dirname, '../..');

/** One server process, started exactly as production starts it (`node src/server.ts`). */
export interface Instance {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything the process wrote (stdout and stderr). */
  output(): string;
  /** Sends a signal and waits for the exit code. */
  kill(signal: NodeJS.Signals): Promise<number | null>;
}

export interface Cluster {
  readonly instances: Instance[];
  /** Direct connection string to the cluster's own database (not through the proxy). */
  readonly databaseUrl: string;
  /** Cut and restore the instances' path to PostgreSQL (to the pooler, when there is one). */
  readonly dbProxy: TcpProxy;
  readonly dbProxyPort: number;
  /**
   * The instances' own Redis (one server; a three-master Redis Cluster when REDIS_CLUSTER_NODES is
   * set), reached through proxies: cut, frozen, signalled (SIGSTOP) or restarted empty.
   */
  readonly redis: OwnRedis;
  token(userId: string): Promise<string>;
  /** fetch against instance i (round-robin when i is omitted) with the user's token. */
  call(userId: string, method: string, pathname: string, body?: unknown, instance?: number): Promise<Response>;
  /** A plain SQL client on the cluster's database. */
  sql<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, params?: unknown[]): Promise<T[]>;
  /** `launcher`: a command the instance is run under (e.g. `prlimit --nofile=N:N`, which execs node: same PID). */
  startInstance(extraEnv?: Record<string, string>, launcher?: readonly string[]): Promise<Instance>;
  close(): Promise<void>;
}

export const CLUSTER_STORES = {
  databaseUrl: process.env.DATABASE_URL,
  redisUrl: process.env.REDIS_URL,
  /** DESIGN §15: set, the suites run on a Redis Cluster of their own instead of one redis-server. */
  redisCluster: process.env.REDIS_CLUSTER_NODES !== undefined && process.env.REDIS_CLUSTER_NODES !== '',
  /**
   * DESIGN §15: a transaction-mode pooler in front of DATABASE_URL's server (test/with-services.ts
   * pgbouncer): the instances' statements go through it, unnamed (DATABASE_PREPARED_STATEMENTS=false),
   * and only their LISTEN connection (DATABASE_LISTEN_URL) goes to PostgreSQL directly.
   */
  poolerUrl: process.env.TEST_DATABASE_POOLER_URL || undefined,
};

/** What the instances share, for the suites' names. */
export const CLUSTER_STORES_NAME = [
  CLUSTER_STORES.poolerUrl ? 'one PostgreSQL through PgBouncer (transaction mode)' : 'one PostgreSQL',
  CLUSTER_STORES.redisCluster ? 'a Redis Cluster of three masters' : 'one Redis',
].join(', ');

/**
 * PostgreSQL connections one test instance holds at most (DATABASE_POOL_SIZE; the service's default
 * is 20). `.ci/run` runs test:redis-cluster and test:pooler side by side against one PostgreSQL with
 * max_connections 100 (3 of them reserved for superusers), and both must stay under it together.
 * Direct phase, at its peak (resume.test.ts: 3 instances + 2 without Redis + 1 victim = 6): 6 × 8 pool
 * + 2 LISTEN connections (the instances without Redis) + 4 (the harness's own `sqlClient`) + 1 (an
 * instance's migrations at start, one at a time) = 55. Pooler phase: PgBouncer's 10 server
 * connections (default_pool_size, test/helpers/pgbouncer.ts; the instances' pools go to it) + 2 LISTEN
 * + 4 + 1 (both direct, DATABASE_LISTEN_URL) = 17. Together 72 < 97, with room for the rest of the
 * machine. At the old 20 a phase alone reached 6 × 20 + 7 = 127 and PostgreSQL refused with 53300.
 */
const INSTANCE_POOL_SIZE = 8;

/** `application_name` of the harness's own database connections (`cluster.sql`). */
export const CLUSTER_TEST_APPLICATION = 'advisor-cluster-test';

/**
 * N instances sharing a fresh PostgreSQL database and a Redis of their own (a Redis Cluster with
 * REDIS_CLUSTER_NODES set), each reached through TCP proxies the tests can cut. Needs DATABASE_URL (a
 * server where it may create databases) and `redis-server` on PATH (and `redis-cli` for a cluster).
 */
export async function startCluster(opts: { instances: number; env?: Record<string, string> }): Promise<Cluster> {
  const adminUrl = CLUSTER_STORES.databaseUrl;
  if (!adminUrl) throw new Error('startCluster needs DATABASE_URL');
  await ensureDatabase(adminUrl);
  const dbName = `advisor_cluster_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  const direct = new URL(adminUrl);
  direct.pathname = `/${dbName}`;
  const databaseUrl = direct.toString();

  const dropDatabase = async (): Promise<void> => {
    const a = new pg.Client({ connectionString: adminUrl });
    await a.connect();
    await a.query(`drop database if exists ${dbName} with (force)`);
    await a.end();
  };

  let redis: OwnRedis;
  try {
    redis = await startOwnRedis({ cluster: CLUSTER_STORES.redisCluster, proxied: true });
  } catch (err) {
    await dropDatabase();
    throw err;
  }

  const pooler = CLUSTER_STORES.poolerUrl ? new URL(CLUSTER_STORES.poolerUrl) : undefined;
  const dbTarget = pooler ?? direct;
  const dbProxy = new TcpProxy(dbTarget.hostname, Number(dbTarget.port || 5432));
  const dbProxyPort = await dbProxy.start(0);
  const viaProxy = new URL(databaseUrl);
  viaProxy.port = String(dbProxyPort);
  viaProxy.hostname = '127.0.0.1';
  const poolerEnv: Record<string, string> = pooler ? { DATABASE_LISTEN_URL: databaseUrl, DATABASE_PREPARED_STATEMENTS: 'false' } : {};

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'advisor-cluster-'));
  const baseEnv: Record<string, string> = {
    DATABASE_POOL_SIZE: String(INSTANCE_POOL_SIZE),
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    DATABASE_URL: viaProxy.toString(),
    ...poolerEnv,
    ...redis.env,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    ENCRYPTION_KEYS: TEST_ENCRYPTION_KEYS,
    LOG_LEVEL: 'warn',
    ...opts.env,
  };
  // Named, so a fault test that terminates the instances' backends can leave the test's own alone.
  const sqlClient = new pg.Pool({ connectionString: databaseUrl, max: 4, application_name: CLUSTER_TEST_APPLICATION });
  sqlClient.on('error', () => undefined);
  sqlClient.on('connect', (client) => client.on('error', () => undefined));

  const instances: Instance[] = [];
  const startInstance = async (extraEnv: Record<string, string> = {}, launcher: readonly string[] = []): Promise<Instance> => {
    const instance = await spawnInstance({ ...baseEnv, ...extraEnv }, launcher);
    instances.push(instance);
    return instance;
  };

  let next = 0;
  const cluster: Cluster = {
    instances,
    databaseUrl,
    dbProxy,
    dbProxyPort,
    redis,
    token: (userId) => mintToken(TEST_JWT_SECRET, userId),
    async call(userId, method, pathname, body, instance) {
      const live = instances.filter((x) => x.child.exitCode === null && x.child.signalCode === null);
      const target = instance === undefined ? live[next++ % live.length] : instances[instance];
      if (!target) throw new Error('no live instance');
      return fetch(`${target.url}${pathname}`, {
        method,
        headers: {
          authorization: `Bearer ${await cluster.token(userId)}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    },
    async sql(text, params) {
      return (await sqlClient.query(text, params)).rows;
    },
    startInstance,
    async close() {
      await Promise.all(instances.filter((x) => x.child.exitCode === null && x.child.signalCode === null).map((x) => x.kill('SIGKILL')));
      await sqlClient.end();
      await dbProxy.stop();
      await redis.stop();
      await dropDatabase();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    // One at a time: the first applies the migrations, the others find them applied.
    for (let i = 0; i < opts.instances; i++) await startInstance();
  } catch (err) {
    // Nothing started so far may outlive a failed start.
    await cluster.close().catch(() => undefined);
    throw err;
  }
  return cluster;
}

async function spawnInstance(env: Record<string, string>, launcher: readonly string[]): Promise<Instance> {
  const [command = process.execPath, ...args] = [...launcher, process.execPath, 'src/server.ts'];
  const child = spawn(command, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`instance did not start: ${out}`));
    }, 30_000);
    const onData = () => {
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match?.[1]) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`instance exited ${code}: ${out}`));
    });
  });
  return {
    url,
    child,
    output: () => out,
    async kill(signal) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const [code] = (await once(child, 'exit')) as [number | null];
      return code;
    },
  };
}
