// A service's Redis connection beside an admin one that can freeze the server: `CLIENT PAUSE … ALL`
// holds every other client's commands (read, not yet run) for a while, as a SIGSTOP'd Redis would.
// The pause is server-wide: nothing else may use that Redis meanwhile.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { closeRedis, openRedis, redisCall } from '../../src/platform/redis-connection.ts';

export interface FreezableRedis {
  /** The connection under test, opened as the service opens it, and ready. */
  readonly client: Redis;
  /** A key prefix of its own, removed afterwards. */
  readonly prefix: string;
  /** Holds every client's commands for `ms`. */
  freeze(ms: number): Promise<void>;
}

export async function withFreezableRedis(url: string, tag: string, body: (r: FreezableRedis) => Promise<void>): Promise<void> {
  const prefix = `test:${tag}:${randomBytes(6).toString('hex')}:`;
  const client = openRedis(url);
  const admin = new Redis(url);
  try {
    await redisCall(client, (c) => c.ping());
    await body({ client, prefix, freeze: async (ms) => void (await admin.call('CLIENT', 'PAUSE', String(ms), 'ALL')) });
  } finally {
    await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
    await admin.quit();
    await closeRedis(client);
  }
}
