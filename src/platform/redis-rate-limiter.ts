import { secureRandomBytes } from './ids.ts';
import type { Clock } from './clock.ts';
import { assertRule, windowDecision, type RateLimitDecision, type RateLimiter, type RateLimitRule } from './rate-limiter.ts';
import { LuaScript, redisCall, userTag, type RedisClient } from './redis-connection.ts';

// One script, so trimming, counting and recording are one atomic step across every instance.
// Time comes from the caller (ARGV) rather than Redis TIME so an injected clock governs the window.
// KEYS[1] the window; ARGV now, window, limit, now - window, the hit's member. Leaves `allowed`,
// `count`, `oldest` and `newest` for the script's answer (redis-admission.ts runs it too).
export const HIT_STEP = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[4])
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[5])
  count = count + 1
  allowed = 1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] then
  redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(newest[2]) + window - now))
end
`;
const HIT = new LuaScript(`${HIT_STEP} return {allowed, count, oldest[2] or '', newest[2] or ''}`);

/** One hit of `subject` under `rule` at `nowMs`: its window's key, its member, and HIT_STEP's arguments. */
export function hitOf(prefix: string, rule: RateLimitRule, subject: string, nowMs: number): { key: string; member: string; args: (string | number)[] } {
  assertRule(rule);
  // The encoded rule name holds no ':' (nor '{'), so the first ':' after it ends it: no two
  // (rule, subject) pairs share a key. The subject is a user: the key carries the user's hash tag.
  const key = `${prefix}rl:${encodeURIComponent(rule.name)}:${userTag(subject)}`;
  const member = `${nowMs}:${secureRandomBytes(8).toString('hex')}`;
  return { key, member, args: [nowMs, rule.windowMs, rule.limit, nowMs - rule.windowMs, member] };
}

/** The decision from HIT_STEP's four answers (allowed, count, oldest, newest), as every store returns it. */
export function decisionOf(rule: RateLimitRule, nowMs: number, reply: readonly unknown[]): RateLimitDecision {
  const [allowed, count, oldest, newest] = reply.map(String);
  return windowDecision(rule, nowMs, {
    allowed: allowed === '1',
    count: Number(count),
    oldestMs: oldest ? Number(oldest) : null,
    newestMs: newest ? Number(newest) : null,
  });
}

export interface RedisRateLimiterOptions {
  /** The instance's Redis connection (see openRedis); its owner closes it. */
  readonly client: RedisClient;
  /** Prepended to every key; lets tests and deployments share one Redis. */
  readonly prefix: string;
  readonly clock: Clock;
}

export function createRedisRateLimiter(opts: RedisRateLimiterOptions): RateLimiter {
  const { client } = opts;
  return {
    async hit(rule, subject) {
      const nowMs = opts.clock.now().getTime();
      const { key, member, args } = hitOf(opts.prefix, rule, subject, nowMs);
      // The request is answered 503 when this fails; a hit that still runs when a frozen Redis wakes must not count.
      const reply = await redisCall(client, (c) => HIT.run(c, [key], args), { undo: (c) => c.zrem(key, member), forMs: rule.windowMs });
      if (!Array.isArray(reply) || reply.length !== 4) throw new Error('unexpected reply from the rate-limit script');
      return decisionOf(rule, nowMs, reply);
    },
    async close() {},
  };
}
