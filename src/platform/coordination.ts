import type { Config } from '../config.ts';
import { admitInTurn, type Admission } from './admission.ts';
import type { Db } from '../db/types.ts';
import type { Clock } from './clock.ts';
import { createMemoryRateLimiter } from './memory-rate-limiter.ts';
import { createMemoryStreamLeases } from './memory-stream-leases.ts';
import { createPgRateLimiter } from './pg-rate-limiter.ts';
import { createPgStreamLeases } from './pg-stream-leases.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';
import { createRedisStreamLeases } from './redis-stream-leases.ts';
import { createRedisAdmission } from './redis-admission.ts';
import { closeRedis, openRedis, type RedisClient } from './redis-connection.ts';
import type { StreamLeases } from './stream-lease.ts';
import { FrameLog } from './frame-log.ts';
import type { FrameStore } from './frame-store.ts';
import { createMemoryFrameStore } from './memory-frame-store.ts';
import { createPgFrameStore } from './pg-frame-store.ts';
import { createRedisFrameStore } from './redis-frame-store.ts';

export interface Coordination {
  readonly limiter: RateLimiter;
  readonly leases: StreamLeases;
  /** A stream's rate-limit verdict and lease, asked for together (one round trip on Redis). */
  readonly admission: Admission;
  /** DESIGN §12: the turns' frame logs. */
  readonly frames: FrameLog;
  readonly store: 'redis' | 'postgres' | 'memory';
  close(): Promise<void>;
}

/**
 * Where limits, leases and frame logs live: Redis when configured; else the shared PostgreSQL (still exact
 * across instances); else this process (the embedded single-instance default).
 */
/** `observeWrite`: the seconds each write of a turn's frame log took (DESIGN §16, advisor_frame_log_write_seconds). */
export function createCoordination(
  config: Config,
  db: Db,
  clock: Clock,
  redisPrefix: string,
  onError: (err: unknown, what: string) => void,
  observeWrite: (seconds: number) => void = () => undefined,
): Coordination {
  let limiter: RateLimiter;
  let leases: StreamLeases;
  let admission: Admission | undefined;
  let frameStore: FrameStore;
  let store: Coordination['store'];
  let redis: RedisClient | undefined;
  if (config.redis) {
    // One connection for all: limits and leases need the same availability, not two sockets.
    redis = openRedis(config.redis);
    limiter = createRedisRateLimiter({ client: redis, prefix: redisPrefix, clock });
    leases = createRedisStreamLeases({ client: redis, prefix: redisPrefix });
    admission = createRedisAdmission({ client: redis, prefix: redisPrefix, clock });
    frameStore = createRedisFrameStore({ client: redis, prefix: redisPrefix, onError: (err) => onError(err, 'redis frame store') });
    store = 'redis';
  } else if (config.databaseUrl) {
    limiter = createPgRateLimiter(db, clock);
    leases = createPgStreamLeases(db, clock);
    frameStore = createPgFrameStore({
      db,
      listenUrl: config.databaseListenUrl ?? config.databaseUrl,
      clock,
      onError: (err) => onError(err, 'postgres frame store'),
    });
    store = 'postgres';
  } else {
    limiter = createMemoryRateLimiter(clock);
    leases = createMemoryStreamLeases(clock);
    frameStore = createMemoryFrameStore(clock, (err) => onError(err, 'frame-log control'));
    store = 'memory';
  }
  timeWrites(frameStore, observeWrite);
  const frames = new FrameLog(frameStore, {
    retentionMs: config.streamLogRetentionMs,
    maxBytes: config.streamLogMaxBytes,
    maxDurationMs: config.streamMaxDurationMs,
    heartbeatMs: config.streamHeartbeatMs,
    onError,
  });
  return {
    limiter,
    leases,
    admission: admission ?? admitInTurn(limiter, leases),
    frames,
    store,
    async close() {
      await Promise.all([limiter.close(), leases.close(), frames.close()]);
      if (redis) await closeRedis(redis);
    },
  };
}

/** Each write of `store` timed: its own `write` wraps the store's. */
function timeWrites(store: FrameStore, observe: (seconds: number) => void): void {
  const write = store.write.bind(store);
  store.write = async (turnId, batch, ttlMs, notify) => {
    const started = performance.now();
    try {
      return await write(turnId, batch, ttlMs, notify);
    } finally {
      observe((performance.now() - started) / 1000);
    }
  };
}
