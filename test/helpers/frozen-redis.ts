// A service's Redis connection that a test can freeze: the connection goes through a loopback TCP
// proxy that stops forwarding for a while and then delivers what it held, as a SIGSTOP'd Redis reads
// and runs its clients' commands when it wakes. Only this connection freezes: the Redis server stays
// free for every other test running meanwhile.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { closeRedis, openRedis, redisCall } from '../../src/platform/redis-connection.ts';
import { TcpProxy } from './net.ts';

export interface FreezableRedis {
  /** The connection under test, opened as the service opens it, and ready. */
  readonly client: Redis;
  /** A key prefix of its own, removed afterwards. */
  readonly prefix: string;
  /** Holds the connection's commands (unread by Redis) for `ms`, then lets them through. */
  freeze(ms: number): Promise<void>;
}

export async function withFreezableRedis(url: string, tag: string, body: (r: FreezableRedis) => Promise<void>): Promise<void> {
  const prefix = `test:${tag}:${randomBytes(6).toString('hex')}:`;
  const target = new URL(url);
  const proxy = new TcpProxy(target.hostname, Number(target.port || 6379));
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(await proxy.start(0));
  const client = openRedis(proxied.toString());
  const admin = new Redis(url);
  let thaw: NodeJS.Timeout | undefined;
  try {
    await redisCall(client, (c) => c.ping());
    await body({
      client,
      prefix,
      freeze: async (ms) => {
        proxy.freeze();
        thaw = setTimeout(() => proxy.thaw(), ms);
      },
    });
  } finally {
    clearTimeout(thaw);
    proxy.thaw();
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
    await admin.quit();
    await closeRedis(client);
    await proxy.stop();
  }
}
