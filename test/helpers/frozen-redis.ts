// A service's Redis connection that a test can freeze: the connection goes through loopback TCP
// proxies (one per cluster node) that stop forwarding for a while and then deliver what they held, as
// a SIGSTOP'd Redis reads and runs its clients' commands when it wakes. Only this connection freezes:
// the Redis server (or cluster) stays free for every other test running meanwhile.
import { randomBytes } from 'node:crypto';
import type { NatMap } from 'ioredis';
import type { RedisEndpoint, RedisNode } from '../../src/config.ts';
import { closeRedis, openRedis, redisCall, type RedisClient } from '../../src/platform/redis-connection.ts';
import { TcpProxy } from './net.ts';
import { adminRedis, deleteKeys } from './redis.ts';

export interface FreezableRedis {
  /** The connection under test, opened as the service opens it, and ready. */
  readonly client: RedisClient;
  /** A key prefix of its own, removed afterwards. */
  readonly prefix: string;
  /** Holds the connection's commands (unread by Redis) for `ms`, then lets them through. */
  freeze(ms: number): Promise<void>;
}

export async function withFreezableRedis(endpoint: RedisEndpoint, tag: string, body: (r: FreezableRedis) => Promise<void>): Promise<void> {
  const prefix = `test:${tag}:${randomBytes(6).toString('hex')}:`;
  const { client, proxies } = await proxiedRedis(endpoint);
  let thaw: NodeJS.Timeout | undefined;
  const thawAll = (): void => proxies.forEach((p) => p.thaw());
  try {
    await redisCall(client, (c) => c.ping());
    await body({
      client,
      prefix,
      freeze: async (ms) => {
        proxies.forEach((p) => p.freeze());
        thaw = setTimeout(thawAll, ms);
      },
    });
  } finally {
    clearTimeout(thaw);
    thawAll();
    await deleteKeys(endpoint, prefix);
    await closeRedis(client);
    await Promise.all(proxies.map((p) => p.stop()));
  }
}

/**
 * A client opened as the service opens it, through a proxy per server: one for a single Redis, one per
 * master of a cluster (the addresses the cluster announces are mapped to their proxies).
 */
export async function proxiedRedis(endpoint: RedisEndpoint): Promise<{ client: RedisClient; proxies: TcpProxy[] }> {
  const proxies: TcpProxy[] = [];
  const proxy = async (node: RedisNode): Promise<RedisNode> => {
    const p = new TcpProxy(node.host, node.port);
    proxies.push(p);
    return { host: '127.0.0.1', port: await p.start(0) };
  };
  if (!endpoint.clusterNodes) {
    const target = new URL(endpoint.url ?? '');
    const via = await proxy({ host: target.hostname, port: Number(target.port || 6379) });
    target.hostname = via.host;
    target.port = String(via.port);
    return { client: openRedis(target.toString()), proxies };
  }
  const natMap: Record<string, RedisNode> = {};
  for (const master of await clusterMasters(endpoint)) natMap[`${master.host}:${master.port}`] = await proxy(master);
  return { client: openRedis({ url: endpoint.url, clusterNodes: Object.values(natMap) }, () => undefined, natMap as NatMap), proxies };
}

async function clusterMasters(endpoint: RedisEndpoint): Promise<RedisNode[]> {
  const admin = adminRedis(endpoint);
  try {
    const slots = (await admin.call('cluster', 'slots')) as [number, number, [string, number]][];
    return slots.map(([, , [host, port]]) => ({ host, port }));
  } finally {
    await admin.quit();
  }
}
