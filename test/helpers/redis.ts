// The Redis the suites run on: REDIS_URL (one server) or REDIS_CLUSTER_NODES (a Redis Cluster, DESIGN
// §15), read the way the service reads them; and the cleanup of a test's keys on either.
import { Cluster, Redis } from 'ioredis';
import { loadConfig, type RedisEndpoint } from '../../src/config.ts';
import { openRedis, type RedisClient } from '../../src/platform/redis-connection.ts';

/** Undefined: no Redis configured, the Redis-backed tests are not registered. */
export const REDIS_UNDER_TEST: RedisEndpoint | undefined = loadConfig({
  REDIS_URL: process.env.REDIS_URL,
  REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES,
}).redis;

/**
 * The service's own client (`openRedis`), once connected. A test of concurrent operations starts from
 * a connected instance, as a deployed one is long before its traffic, not from its first second: on a
 * loaded machine a Redis Cluster client can take longer than `redisCall`'s 1 s wait for a connection to
 * become ready, and the calls are then answered 503 by design, which is not what such a test is about.
 */
export async function openReadyRedis(endpoint: RedisEndpoint | string): Promise<RedisClient> {
  const client = openRedis(endpoint);
  if (client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  return client;
}

/** A plain client (queues while connecting) for a test's own reads and cleanup. */
export function adminRedis(endpoint: RedisEndpoint): Redis | Cluster {
  if (endpoint.clusterNodes) return new Cluster(endpoint.clusterNodes.map((n) => ({ host: n.host, port: n.port })));
  return new Redis(endpoint.url ?? '');
}

/** Deletes every key under `prefix`: on a cluster, found on each master and deleted one by one (a multi-key DEL would cross slots). */
export async function deleteKeys(endpoint: RedisEndpoint, prefix: string): Promise<void> {
  const admin = adminRedis(endpoint);
  try {
    if (admin instanceof Cluster) {
      await new Promise<void>((resolve, reject) => admin.once('ready', resolve).once('error', reject));
      const found = await Promise.all(admin.nodes('master').map((node) => node.keys(`${prefix}*`)));
      await Promise.all(found.flat().map((key) => admin.del(key)));
    } else {
      const keys = await admin.keys(`${prefix}*`);
      if (keys.length > 0) await admin.del(...keys);
    }
  } finally {
    await admin.quit();
  }
}
