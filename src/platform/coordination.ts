import type { Config } from '../config.ts';
import type { Db } from '../db/types.ts';
import type { Clock } from './clock.ts';
import { createMemoryRateLimiter } from './memory-rate-limiter.ts';
import { createMemoryStreamLeases } from './memory-stream-leases.ts';
import { createPgRateLimiter } from './pg-rate-limiter.ts';
import { createPgStreamLeases } from './pg-stream-leases.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';
import { createRedisStreamLeases } from './redis-stream-leases.ts';
import { closeRedis, openRedis } from './redis-connection.ts';
import type { Redis } from 'ioredis';
import type { StreamLeases } from './stream-lease.ts';

export interface Coordination {
  readonly limiter: RateLimiter;
  readonly leases: StreamLeases;
  readonly store: 'redis' | 'postgres' | 'memory';
  close(): Promise<void>;
}

/**
 * Where limits and leases live: Redis when configured; else the shared PostgreSQL (still exact
 * across instances); else this process (the embedded single-instance default).
 */
export function createCoordination(config: Config, db: Db, clock: Clock, redisPrefix: string): Coordination {
  let limiter: RateLimiter;
  let leases: StreamLeases;
  let store: Coordination['store'];
  let redis: Redis | undefined;
  if (config.redisUrl) {
    // One connection for both: limits and leases need the same availability, not two sockets.
    redis = openRedis(config.redisUrl);
    limiter = createRedisRateLimiter({ client: redis, prefix: redisPrefix, clock });
    leases = createRedisStreamLeases({ client: redis, prefix: redisPrefix });
    store = 'redis';
  } else if (config.databaseUrl) {
    limiter = createPgRateLimiter(db, clock);
    leases = createPgStreamLeases(db, clock);
    store = 'postgres';
  } else {
    limiter = createMemoryRateLimiter(clock);
    leases = createMemoryStreamLeases(clock);
    store = 'memory';
  }
  return {
    limiter,
    leases,
    store,
    async close() {
      await Promise.all([limiter.close(), leases.close()]);
      if (redis) await closeRedis(redis);
    },
  };
}
