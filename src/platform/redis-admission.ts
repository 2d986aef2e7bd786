import type { Admission } from './admission.ts';
import type { Clock } from './clock.ts';
import { randomToken } from './ids.ts';
import { LuaScript, redisCall, type RedisClient } from './redis-connection.ts';
import { decisionOf, HIT_STEP, hitOf } from './redis-rate-limiter.ts';
import { leaseKey, RELEASE } from './redis-stream-leases.ts';

/**
 * The rate-limit step (HIT_STEP, the limiter's own) and, for an admitted request, the lease's SET NX,
 * in one script: one round trip at a stream's start. KEYS[1] the window, KEYS[2] the lease (both carry
 * the user's hash tag: one slot on a cluster); ARGV as HIT_STEP's, then the lease's token and ttl.
 */
const ADMIT = new LuaScript(`${HIT_STEP}
local leased = 0
if allowed == 1 and redis.call('SET', KEYS[2], ARGV[6], 'PX', ARGV[7], 'NX') then leased = 1 end
return {allowed, count, oldest[2] or '', newest[2] or '', leased}`);

export interface RedisAdmissionOptions {
  /** The instance's Redis connection (see openRedis); its owner closes it. */
  readonly client: RedisClient;
  /** The prefix of every key: the limiter's and the leases' (the same keys they use). */
  readonly prefix: string;
  readonly clock: Clock;
}

export function createRedisAdmission(opts: RedisAdmissionOptions): Admission {
  const { client, prefix } = opts;
  return {
    async admit(rule, userId, leaseTtlMs) {
      const nowMs = opts.clock.now().getTime();
      const hit = hitOf(prefix, rule, userId, nowMs);
      const lease = leaseKey(prefix, userId);
      const token = randomToken(16);
      // The request is answered 503 when this fails; a script that still runs when a frozen Redis wakes
      // must neither count the hit nor leave the user a lease nobody holds.
      const reply = await redisCall(client, (c) => ADMIT.run(c, [hit.key, lease], [...hit.args, token, leaseTtlMs], { now: true }), {
        undo: (c) => Promise.all([c.zrem(hit.key, hit.member), RELEASE.run(c, [lease], [token])]),
        forMs: Math.max(rule.windowMs, leaseTtlMs),
      });
      if (!Array.isArray(reply) || reply.length !== 5) throw new Error('unexpected reply from the admission script');
      return { decision: decisionOf(rule, nowMs, reply.slice(0, 4)), lease: reply[4] === 1 ? token : null };
    },
  };
}
