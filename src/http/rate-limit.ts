import type { RateLimitDecision, RateLimiter, RateLimitRule } from '../platform/rate-limiter.ts';
import { AppError } from './errors.ts';

/**
 * A Structured Fields (RFC 9651) String: printable ASCII with `"` and `\` escaped. Rule names are
 * code, but a character outside that range would make the whole header unparseable, so it is replaced.
 */
function sfString(value: string): string {
  return `"${value.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

/**
 * Headers of draft-ietf-httpapi-ratelimit-headers (-10/-11): the policy
 * (`RateLimit-Policy: "name";q=10;w=3600`) and the live state (`RateLimit: "name";r=3;t=1200`), plus
 * `Retry-After` when refused, rounded up so a client that waits exactly that long is admitted.
 */
export function rateLimitHeaders(rule: RateLimitRule, decision: RateLimitDecision): Record<string, string> {
  const name = sfString(rule.name);
  const headers: Record<string, string> = {
    'RateLimit-Policy': `${name};q=${rule.limit};w=${seconds(rule.windowMs)}`,
    RateLimit: `${name};r=${decision.remaining};t=${seconds(decision.resetMs)}`,
  };
  if (!decision.allowed) headers['Retry-After'] = String(Math.max(1, seconds(decision.retryAfterMs)));
  return headers;
}

/** Counts one hit; sets the headers on an admitted request, throws RATE_LIMITED (429) otherwise. */
export async function enforceRateLimit(
  limiter: RateLimiter,
  rule: RateLimitRule,
  subject: string,
  reply: { header(name: string, value: string): unknown },
): Promise<void> {
  applyDecision(rule, await limiter.hit(rule, subject), reply);
}

/** A decision taken: the headers on an admitted request, RATE_LIMITED (429) otherwise. */
export function applyDecision(rule: RateLimitRule, decision: RateLimitDecision, reply: { header(name: string, value: string): unknown }): void {
  const headers = rateLimitHeaders(rule, decision);
  if (!decision.allowed) {
    throw new AppError('RATE_LIMITED', `Rate limit exceeded: at most ${rule.limit} per ${seconds(rule.windowMs)} s`, { headers });
  }
  for (const [name, value] of Object.entries(headers)) reply.header(name, value);
}
