import { sql } from 'kysely';
import type { Db } from '../db/types.ts';
import type { Clock } from './clock.ts';
import { assertRule, windowDecision, type RateLimiter } from './rate-limiter.ts';

/**
 * Rolling window in PostgreSQL (or embedded PGlite): one row per admitted hit. A transaction-scoped
 * advisory lock per (rule, subject) serialises concurrent hits of one subject across every instance
 * without locking anyone else; it is released by commit or rollback, so a crash cannot leave it held.
 * The caller owns `db`; close() leaves it open.
 */
export function createPgRateLimiter(db: Db, clock: Clock): RateLimiter {
  return {
    async hit(rule, subject) {
      assertRule(rule);
      const now = clock.now();
      const windowStart = new Date(now.getTime() - rule.windowMs);
      const state = await db.transaction().execute(async (trx) => {
        // Two 32-bit keys: rule and subject hashed apart, so ('a:b','c') and ('a','b:c') differ.
        await sql`select pg_advisory_xact_lock(hashtext(${`rate-limit:${rule.name}`}), hashtext(${subject}))`.execute(trx);
        await trx.deleteFrom('rate_limit_hits').where('bucket', '=', rule.name).where('subject', '=', subject).where('at', '<=', windowStart).execute();
        const before = await trx
          .selectFrom('rate_limit_hits')
          .where('bucket', '=', rule.name)
          .where('subject', '=', subject)
          .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.min('at').as('oldest'), eb.fn.max('at').as('newest')])
          .executeTakeFirstOrThrow();
        const count = Number(before.count);
        const allowed = count < rule.limit;
        if (allowed) await trx.insertInto('rate_limit_hits').values({ bucket: rule.name, subject, at: now }).execute();
        const times = [before.oldest, before.newest, ...(allowed ? [now] : [])].filter((d): d is Date => d instanceof Date).map((d) => d.getTime());
        return {
          allowed,
          count: allowed ? count + 1 : count,
          oldestMs: times.length > 0 ? Math.min(...times) : null,
          newestMs: times.length > 0 ? Math.max(...times) : null,
        };
      });
      return windowDecision(rule, now.getTime(), state);
    },
    async close() {
      // Nothing of its own to release.
    },
  };
}
