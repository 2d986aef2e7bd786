import { randomToken } from './ids.ts';
import { LuaScript, redisCall, userTag, type RedisClient } from './redis-connection.ts';
import type { StreamLeases } from './stream-lease.ts';

// Compare-and-act in one script: checking the token and then acting in two commands would let a
// lease that expired and was taken in between be extended or deleted by its former holder.
// A lease gone from Redis (expired, or Redis restarted empty) is set again for its holder: without it
// a second stream of the same user could start beside the running one.
const RENEW = new LuaScript(`
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`);
export const RELEASE = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`);

/** The user's stream lease: it carries the user's hash tag, like the user's rate-limit windows (one slot on a cluster). */
export const leaseKey = (prefix: string, userId: string): string => `${prefix}lease:${userTag(userId)}`;

export interface RedisStreamLeasesOptions {
  /** The instance's Redis connection (see openRedis); its owner closes it. */
  readonly client: RedisClient;
  /** Prepended to every key; lets tests and deployments share one Redis. */
  readonly prefix: string;
}

/**
 * Leases as Redis keys with PX expiry. Unlike the other implementations this takes no Clock:
 * expiry is timed by Redis itself, which is what lets it outlive a crashed instance.
 */
export function createRedisStreamLeases(opts: RedisStreamLeasesOptions): StreamLeases {
  const { client } = opts;
  const key = (userId: string): string => leaseKey(opts.prefix, userId);
  return {
    async acquire(userId, ttlMs) {
      const token = randomToken(16);
      // The caller answers 503 when this fails and gives the lease up; a SET that still runs when a
      // frozen Redis wakes (or whose reply was lost) must not leave the user a lease nobody holds.
      const reply = await redisCall(client, (c) => c.set(key(userId), token, 'PX', ttlMs, 'NX'), {
        undo: (c) => RELEASE.run(c, [key(userId)], [token]),
        forMs: ttlMs,
      });
      return reply === 'OK' ? token : null;
    },
    async renew(userId, token, ttlMs) {
      const reply = await redisCall(client, (c) => RENEW.run(c, [key(userId)], [token, ttlMs]));
      return reply === 1;
    },
    async release(userId, token) {
      await redisCall(client, (c) => RELEASE.run(c, [key(userId)], [token]));
    },
    async close() {},
  };
}
