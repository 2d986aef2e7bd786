import { once } from 'node:events';
// A Redis of a test's own: one redis-server, or a real Redis Cluster of three masters (DESIGN §15),
// each node a process of its own in a temporary directory. Proxied, every client reaches it through
// loopback TCP proxies the test can cut or freeze (a cluster's nodes announce their proxy's port, so
// the cluster's redirections lead through the proxies too).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { RedisEndpoint } from '../../src/config.ts';
import { endChild } from './child.ts';
import { TcpProxy, unusedPort, waitForPort } from './net.ts';

const run = promisify(execFile);
const CLUSTER_READY_BOUND_MS = 30_000;

export interface OwnRedis {
  readonly endpoint: RedisEndpoint;
  /** The service's setting for it: REDIS_URL, or REDIS_CLUSTER_NODES. */
  readonly env: Record<string, string>;
  /** Closes every connection through the proxies and refuses new ones, until `restore`. */
  cut(): Promise<void>;
  restore(): Promise<void>;
  /** Holds every proxied connection's bytes (a Redis that hangs), until `thaw`. */
  freeze(): void;
  thaw(): void;
  /** Sends a signal to every server process (SIGSTOP freezes Redis itself, SIGCONT wakes it). */
  signal(signal: NodeJS.Signals): void;
  /** Kills every server and starts it again empty on the same port (a cluster keeps its slots). */
  restartEmpty(): Promise<void>;
  stop(): Promise<void>;
}

interface NodeSpec {
  readonly port: number;
  readonly busPort: number;
  readonly dir: string;
  readonly proxy: TcpProxy | undefined;
  /** Where clients reach it: its proxy's port, or its own. */
  readonly announced: number;
}

interface Node extends NodeSpec {
  process: ChildProcess;
}

/** `cluster`: three masters; else one redis-server. `proxied`: reached through TCP proxies a test can cut. */
export async function startOwnRedis(opts: { cluster: boolean; proxied: boolean }): Promise<OwnRedis> {
  const root = mkdtempSync(path.join(os.tmpdir(), opts.cluster ? 'advisor-redis-cluster-' : 'advisor-redis-'));
  const nodes: Node[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => endChild(n.process)));
    await Promise.all(nodes.map((n) => n.proxy?.stop()));
    rmSync(root, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < (opts.cluster ? 3 : 1); i++) {
      // A port found free can be taken before redis-server binds it (other suites start servers beside
      // this one): then the node is started again on other ports.
      for (let attempt = 1; ; attempt++) {
        const port = await unusedPort();
        const proxy = opts.proxied ? new TcpProxy('127.0.0.1', port) : undefined;
        const announced = proxy ? await proxy.start(0) : port;
        const spec: NodeSpec = { port, busPort: await unusedPort(), dir: path.join(root, `node-${i}`), proxy, announced };
        try {
          nodes.push({ ...spec, process: await spawnNode(spec, opts.cluster) });
          break;
        } catch (err) {
          await proxy?.stop();
          if (attempt >= 3) throw err;
        }
      }
    }
    if (opts.cluster) await createCluster(nodes);
  } catch (err) {
    await stop();
    throw err;
  }
  const endpoint: RedisEndpoint = opts.cluster
    ? { url: undefined, clusterNodes: nodes.map((n) => ({ host: '127.0.0.1', port: n.announced })) }
    : { url: `redis://127.0.0.1:${nodes[0]?.announced}`, clusterNodes: undefined };
  return {
    endpoint,
    env: endpoint.clusterNodes ? { REDIS_CLUSTER_NODES: endpoint.clusterNodes.map((n) => `${n.host}:${n.port}`).join(',') } : { REDIS_URL: endpoint.url ?? '' },
    async cut() {
      await Promise.all(nodes.map((n) => n.proxy?.stop()));
    },
    async restore() {
      await Promise.all(nodes.map((n) => n.proxy?.start(n.announced)));
    },
    freeze: () => nodes.forEach((n) => n.proxy?.freeze()),
    thaw: () => nodes.forEach((n) => n.proxy?.thaw()),
    signal: (signal) => nodes.forEach((n) => n.process.kill(signal)),
    async restartEmpty() {
      await Promise.all(nodes.map((n) => endChild(n.process)));
      for (const n of nodes) n.process = await spawnNode(n, opts.cluster);
      if (opts.cluster) await clusterReady(nodes);
    },
    stop,
  };
}

/**
 * One server in its own directory, nothing saved to disk. A cluster node keeps its cluster state in
 * `nodes.conf` there (so a restart finds its slots again), gossips on a bus port of its own (a free
 * port, not port + 10000, which may not exist) and announces where clients reach it.
 */
async function spawnNode(node: NodeSpec, cluster: boolean): Promise<ChildProcess> {
  const args = ['--port', String(node.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', node.dir];
  if (cluster) {
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-port', String(node.busPort));
    args.push('--cluster-announce-ip', '127.0.0.1', '--cluster-announce-port', String(node.announced), '--cluster-announce-bus-port', String(node.busPort));
  }
  mkdirSync(node.dir, { recursive: true });
  const child = spawn('redis-server', args, { cwd: node.dir, stdio: 'ignore' });
  let spawnError: Error | undefined;
  child.on('error', (err) => (spawnError = err));
  // A server that could not bind its ports exits at once: that is a failure now, not after the wait.
  const exited = once(child, 'exit').then(() => {
    throw new Error(`redis-server on ${node.port} exited`);
  });
  exited.catch(() => undefined);
  try {
    await Promise.race([waitForPort(node.port), exited]);
  } catch (err) {
    child.kill('SIGKILL');
    throw spawnError ?? err;
  }
  return child;
}

/** `redis-cli --cluster create`, masters only, then waits until every node says `cluster_state:ok`. */
async function createCluster(nodes: readonly Node[]): Promise<void> {
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { timeout: CLUSTER_READY_BOUND_MS });
  await clusterReady(nodes);
}

async function clusterReady(nodes: readonly Node[]): Promise<void> {
  const deadline = Date.now() + CLUSTER_READY_BOUND_MS;
  for (const n of nodes) {
    const client = new Redis({ host: '127.0.0.1', port: n.port, lazyConnect: true, maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    try {
      for (;;) {
        const info = await client.call('cluster', 'info').catch(() => '');
        if (String(info).includes('cluster_state:ok')) break;
        if (Date.now() > deadline) throw new Error(`the Redis Cluster node on ${n.port} is not ok: ${String(info)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      client.disconnect();
    }
  }
}
