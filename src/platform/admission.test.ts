// DESIGN §4 at a stream's start: the rate-limit verdict and the stream lease asked for in one step
// (one Redis script; the embedded store composes its two). Real concurrent calls from two clients.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { ManualClock } from '../../test/helpers/manual-clock.ts';
import { REDIS_UNDER_TEST, deleteKeys, openReadyRedis } from '../../test/helpers/redis.ts';
import { admitInTurn, type Admission } from './admission.ts';
import { createMemoryRateLimiter } from './memory-rate-limiter.ts';
import { createMemoryStreamLeases } from './memory-stream-leases.ts';
import type { RateLimiter, RateLimitRule } from './rate-limiter.ts';
import { createRedisAdmission } from './redis-admission.ts';
import { closeRedis } from './redis-connection.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';
import { createRedisStreamLeases } from './redis-stream-leases.ts';
import type { StreamLeases } from './stream-lease.ts';

const RULE: RateLimitRule = { name: 'admission-test', limit: 5, windowMs: 60_000 };
const TTL_MS = 30_000;

/** Two instances' admissions on one store, with that store's limiter and leases (the pieces it answers for). */
interface Store {
  readonly a: Admission;
  readonly b: Admission;
  readonly limiter: RateLimiter;
  readonly leases: StreamLeases;
  /** The leases on `a`'s own connection. */
  readonly leasesOfA: StreamLeases;
  close(): Promise<void>;
}

const stores: { name: string; open: () => Store | Promise<Store> }[] = [
  {
    name: 'memory (limiter, then leases)',
    open() {
      const clock = new ManualClock();
      const limiter = createMemoryRateLimiter(clock);
      const leases = createMemoryStreamLeases(clock);
      const admission = admitInTurn(limiter, leases);
      return { a: admission, b: admission, limiter, leases, leasesOfA: leases, close: async () => undefined };
    },
  },
];
const redis = REDIS_UNDER_TEST;
if (redis) {
  const prefix = `test:admit:${randomBytes(6).toString('hex')}:`;
  after(() => deleteKeys(redis, prefix));
  stores.push({
    name: redis.clusterNodes ? 'Redis Cluster (one script)' : 'Redis (one script)',
    async open() {
      const clock = new ManualClock(new Date());
      const [ca, cb] = await Promise.all([openReadyRedis(redis), openReadyRedis(redis)]);
      return {
        a: createRedisAdmission({ client: ca, prefix, clock }),
        b: createRedisAdmission({ client: cb, prefix, clock }),
        limiter: createRedisRateLimiter({ client: ca, prefix, clock }),
        leases: createRedisStreamLeases({ client: cb, prefix }),
        leasesOfA: createRedisStreamLeases({ client: ca, prefix }),
        close: async () => void (await Promise.all([closeRedis(ca), closeRedis(cb)])),
      };
    },
  });
}

const newUser = (): string => `user-${randomBytes(6).toString('hex')}`;

for (const { name, open } of stores) {
  describe(`stream admission (${name})`, () => {
    test('DESIGN §4: 12 concurrent starts of one user from two instances → exactly 5 admitted (30/60 s rule scaled), one lease among them, every one counted', async () => {
      const s = await open();
      try {
        const user = newUser();
        const all = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? s.a : s.b).admit(RULE, user, TTL_MS)));
        assert.equal(all.filter((r) => r.decision.allowed).length, 5);
        const leased = all.filter((r) => r.lease !== null);
        assert.equal(leased.length, 1, 'one live stream per user');
        assert.ok(leased[0]?.decision.allowed, 'only an admitted request takes the lease');
        // The window is full: the limiter itself refuses the next hit.
        assert.equal((await s.limiter.hit(RULE, user)).allowed, false);
        // The lease taken is the leases' own: another acquire is refused until its holder releases it.
        assert.equal(await s.leases.acquire(user, TTL_MS), null);
        await s.leases.release(user, leased[0]?.lease ?? '');
        assert.notEqual(await s.leases.acquire(user, TTL_MS), null);
      } finally {
        await s.close();
      }
    });

    test('DESIGN §4: a lease given back, then the user’s next start admitted on the same connection in the same tick → the start takes the lease (the connection keeps its order)', async () => {
      const s = await open();
      try {
        const user = newUser();
        // Once through, so the node holding the user's keys has both scripts (a first call answered
        // NOSCRIPT is sent again as EVAL, after whatever followed it).
        const warm = await s.a.admit(RULE, user, TTL_MS);
        await s.leasesOfA.release(user, warm.lease ?? '');
        const first = await s.a.admit(RULE, user, TTL_MS);
        assert.ok(first.lease !== null);
        // Not awaited: the release is still queued for the connection when the next admission is asked.
        const released = s.leasesOfA.release(user, first.lease);
        const next = await s.a.admit(RULE, user, TTL_MS);
        await released;
        assert.ok(next.decision.allowed);
        assert.notEqual(next.lease, null, 'the admission went out before the release asked before it');
      } finally {
        await s.close();
      }
    });

    test('DESIGN §4: a request the limit refuses takes no lease (the lease stays free for an admitted one)', async () => {
      const s = await open();
      try {
        const user = newUser();
        for (let i = 0; i < RULE.limit; i++) {
          const r = await s.a.admit(RULE, user, TTL_MS);
          assert.ok(r.decision.allowed);
          if (r.lease !== null) await s.leases.release(user, r.lease);
        }
        const refused = await s.b.admit(RULE, user, TTL_MS);
        assert.deepEqual([refused.decision.allowed, refused.lease], [false, null]);
        assert.ok(refused.decision.retryAfterMs > 0);
        assert.notEqual(await s.leases.acquire(user, TTL_MS), null, 'the refused request left the lease free');
      } finally {
        await s.close();
      }
    });
  });
}
