import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { unusedPort } from '../../test/helpers/net.ts';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'kysely';
import { proxiedRedis, withFreezableRedis } from '../../test/helpers/frozen-redis.ts';
import { REDIS_UNDER_TEST, deleteKeys, openReadyRedis } from '../../test/helpers/redis.ts';
import type { RedisEndpoint } from '../config.ts';
import { ManualClock } from '../../test/helpers/manual-clock.ts';
import { createDb, type DbHandle } from '../db/create-db.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { AppError } from '../http/errors.ts';
import { enforceRateLimit, rateLimitHeaders } from '../http/rate-limit.ts';
import type { Clock } from './clock.ts';
import { createMemoryRateLimiter } from './memory-rate-limiter.ts';
import { createPgRateLimiter } from './pg-rate-limiter.ts';
import type { RateLimiter, RateLimitRule } from './rate-limiter.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';
import { closeRedis, openRedis } from './redis-connection.ts';
import { migratedEmbeddedDb } from '../../test/helpers/pglite-template.ts';

// Backends that need a service are registered only when it is configured.
const { DATABASE_URL } = process.env;

const HOUR = 3_600_000;
const keySaves: RateLimitRule = { name: 'key-saves', limit: 10, windowMs: HOUR };

/** Two limiter instances sharing one store, as two service instances would. */
interface Instances {
  readonly a: RateLimiter;
  readonly b: RateLimiter;
  close(): Promise<void>;
}

interface Backend {
  readonly name: string;
  before?(): Promise<void>;
  after?(): Promise<void>;
  open(clock: Clock): Promise<Instances>;
}

const memory: Backend = {
  name: 'memory',
  async open(clock) {
    const limiter = createMemoryRateLimiter(clock);
    return { a: limiter, b: limiter, close: () => limiter.close() };
  },
};

function pgliteBackend(): Backend {
  let handle: DbHandle | undefined;
  return {
    name: 'PGlite',
    async before() {
      handle = await migratedEmbeddedDb();
    },
    async after() {
      await handle?.close();
    },
    async open(clock) {
      if (!handle) throw new Error('not set up');
      return { a: createPgRateLimiter(handle.db, clock), b: createPgRateLimiter(handle.db, clock), close: async () => undefined };
    },
  };
}

function postgresBackend(databaseUrl: string): Backend {
  const schema = `test_rl_${randomBytes(6).toString('hex')}`;
  const handles: DbHandle[] = [];
  return {
    name: 'PostgreSQL',
    async before() {
      // Two pools, as two instances would have.
      handles.push(await createDb({ databaseUrl, schema }), await createDb({ databaseUrl, schema }));
      await migrateToLatest(handles[0]?.db ?? assert.fail());
    },
    async after() {
      await sql`drop schema ${sql.id(schema)} cascade`.execute(handles[0]?.db ?? assert.fail());
      await Promise.all(handles.map((h) => h.close()));
    },
    async open(clock) {
      const [one, two] = handles;
      if (!one || !two) throw new Error('not set up');
      return { a: createPgRateLimiter(one.db, clock), b: createPgRateLimiter(two.db, clock), close: async () => undefined };
    },
  };
}

function redisBackend(url: RedisEndpoint): Backend {
  const prefix = `test:rl:${randomBytes(6).toString('hex')}:`;
  return {
    name: url.clusterNodes ? 'Redis Cluster' : 'Redis',
    async after() {
      await deleteKeys(url, prefix);
    },
    async open(clock) {
      // Two connections: the two limiters stand for two instances.
      const [ca, cb] = await Promise.all([openReadyRedis(url), openReadyRedis(url)]);
      const a = createRedisRateLimiter({ client: ca, prefix, clock });
      const b = createRedisRateLimiter({ client: cb, prefix, clock });
      return { a, b, close: async () => void (await Promise.all([closeRedis(ca), closeRedis(cb)])) };
    },
  };
}

const backends: Backend[] = [memory, pgliteBackend()];
if (DATABASE_URL) backends.push(postgresBackend(DATABASE_URL));
if (REDIS_UNDER_TEST) backends.push(redisBackend(REDIS_UNDER_TEST));

/** Runs `body` with fresh instances on a manual clock and always closes them. */
async function withInstances(backend: Backend, body: (i: Instances, clock: ManualClock) => Promise<void>): Promise<void> {
  const clock = new ManualClock();
  const instances = await backend.open(clock);
  try {
    await body(instances, clock);
  } finally {
    await instances.close();
  }
}

const uniqueSubject = () => `user-${randomBytes(6).toString('hex')}`;

for (const backend of backends) {
  describe(`rate limiter (${backend.name})`, () => {
    before(() => backend.before?.());
    after(() => backend.after?.());

    test('DESIGN §4: exact across instances — of 200 concurrent hits exactly `limit` are admitted', () =>
      withInstances(backend, async ({ a, b }) => {
        const rule: RateLimitRule = { name: 'streams', limit: 30, windowMs: 60_000 };
        const subject = uniqueSubject();
        const decisions = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? a : b).hit(rule, subject)));
        assert.equal(decisions.filter((d) => d.allowed).length, 30);
        const remaining = decisions
          .filter((d) => d.allowed)
          .map((d) => d.remaining)
          .sort((x, y) => x - y);
        assert.deepEqual(
          remaining,
          Array.from({ length: 30 }, (_, i) => i),
          'each admitted hit saw a distinct count',
        );
      }));

    test('DESIGN §4: rolling window — 10 hits at t, 11th at t+3599s refused with retryAfterMs 1000, at t+3600s admitted', () =>
      withInstances(backend, async ({ a, b }, clock) => {
        const subject = uniqueSubject();
        for (let i = 0; i < 10; i++) {
          const d = await (i % 2 ? a : b).hit(keySaves, subject);
          assert.deepEqual(d, { allowed: true, limit: 10, remaining: 9 - i, retryAfterMs: 0, resetMs: HOUR });
        }
        clock.advance(HOUR - 1000);
        assert.deepEqual(await a.hit(keySaves, subject), { allowed: false, limit: 10, remaining: 0, retryAfterMs: 1000, resetMs: 1000 });
        clock.advance(1000);
        const admitted = await b.hit(keySaves, subject);
        assert.equal(admitted.allowed, true);
        assert.equal(admitted.remaining, 9, 'the hits at t have left the window');
      }));

    test('DESIGN §4: no fixed-window burst — hits spread across a boundary never exceed the limit in any hour', () =>
      withInstances(backend, async ({ a }, clock) => {
        const subject = uniqueSubject();
        for (let i = 0; i < 5; i++) assert.equal((await a.hit(keySaves, subject)).allowed, true);
        clock.advance(HOUR / 2);
        for (let i = 0; i < 5; i++) assert.equal((await a.hit(keySaves, subject)).allowed, true);
        assert.equal((await a.hit(keySaves, subject)).allowed, false);
        clock.advance(HOUR / 2);
        // The first five left; the second five still count, so exactly five more fit.
        for (let i = 0; i < 5; i++) assert.equal((await a.hit(keySaves, subject)).allowed, true);
        const refused = await a.hit(keySaves, subject);
        assert.equal(refused.allowed, false);
        assert.equal(refused.retryAfterMs, HOUR / 2);
      }));

    test('DESIGN §4: a refused hit is not recorded, so hammering a 429 does not extend the wait', () =>
      withInstances(backend, async ({ a, b }, clock) => {
        const subject = uniqueSubject();
        for (let i = 0; i < 10; i++) await a.hit(keySaves, subject);
        clock.advance(1000);
        for (let i = 0; i < 20; i++) {
          const d = await (i % 2 ? a : b).hit(keySaves, subject);
          assert.equal(d.allowed, false);
          assert.equal(d.retryAfterMs, HOUR - 1000);
        }
        clock.advance(HOUR - 1000);
        for (let i = 0; i < 10; i++) assert.equal((await b.hit(keySaves, subject)).allowed, true, `hit ${i + 1}`);
      }));

    test('DESIGN §4: limits are per subject and per rule, whatever characters the names hold', () =>
      withInstances(backend, async ({ a }) => {
        const subject = uniqueSubject();
        const tight = (name: string): RateLimitRule => ({ name, limit: 1, windowMs: 60_000 });
        assert.equal((await a.hit(tight('r'), subject)).allowed, true);
        assert.equal((await a.hit(tight('r'), subject)).allowed, false);
        assert.equal((await a.hit(tight('r'), `${subject}-other`)).allowed, true, 'another subject');
        assert.equal((await a.hit(tight('r2'), subject)).allowed, true, 'another rule');
        // ('x:y', 'z') and ('x', 'y:z') must not share a bucket.
        assert.equal((await a.hit(tight(`x:${subject}`), 'z')).allowed, true);
        assert.equal((await a.hit(tight('x'), `${subject}:z`)).allowed, true);
      }));
  });
}

function assertUnavailable(err: unknown): true {
  assert.ok(err instanceof AppError);
  assert.equal(err.code, 'SERVICE_UNAVAILABLE');
  assert.equal(err.status, 503);
  assert.equal(err.headers['Retry-After'], '5');
  return true;
}

describe('rate limiter (Redis outage)', () => {
  test('DESIGN §3: Redis down → SERVICE_UNAVAILABLE with Retry-After, within about a second', async () => {
    const client = openRedis(`redis://127.0.0.1:${await unusedPort()}`);
    const limiter = createRedisRateLimiter({ client, prefix: 'down:', clock: new ManualClock() });
    try {
      for (let i = 0; i < 2; i++) {
        const started = performance.now();
        await assert.rejects(limiter.hit(keySaves, 'u'), assertUnavailable);
        assert.ok(performance.now() - started < 1500, 'fails fast');
      }
    } finally {
      await closeRedis(client);
    }
  });

  if (REDIS_UNDER_TEST) {
    const redis = REDIS_UNDER_TEST;
    test(`DESIGN §1: after an outage the limiter recovers by itself within 5 s of Redis returning${redis.clusterNodes ? ' (every node of a Redis Cluster cut)' : ''}`, async () => {
      const prefix = `test:rl:${randomBytes(6).toString('hex')}:`;
      const { client, proxies } = await proxiedRedis(redis);
      const limiter = createRedisRateLimiter({ client, prefix, clock: new ManualClock() });
      try {
        assert.equal((await limiter.hit(keySaves, 'u')).allowed, true);
        await Promise.all(proxies.map((p) => p.stop()));
        await assert.rejects(limiter.hit(keySaves, 'u'), assertUnavailable);
        await Promise.all(proxies.map((p) => p.reopen()));
        const back = performance.now();
        for (;;) {
          const ok = await limiter.hit(keySaves, 'u').then(
            () => true,
            () => false,
          );
          if (ok) break;
          assert.ok(performance.now() - back < 5000, 'recovered within 5 s');
          await delay(100);
        }
      } finally {
        await closeRedis(client);
        await Promise.all(proxies.map((p) => p.stop()));
        await deleteKeys(redis, prefix);
      }
    });
  }
});

describe('DESIGN §3: rate-limit headers', () => {
  const rule: RateLimitRule = { name: 'key-saves', limit: 10, windowMs: HOUR };

  test('an admitted request gets RateLimit-Policy and RateLimit in structured-field syntax, no Retry-After', () => {
    const headers = rateLimitHeaders(rule, { allowed: true, limit: 10, remaining: 3, retryAfterMs: 0, resetMs: 1_199_001 });
    assert.deepEqual(headers, { 'RateLimit-Policy': '"key-saves";q=10;w=3600', RateLimit: '"key-saves";r=3;t=1200' });
  });

  test('a refused request gets Retry-After in whole seconds rounded up, never 0', () => {
    const refused = (retryAfterMs: number) => rateLimitHeaders(rule, { allowed: false, limit: 10, remaining: 0, retryAfterMs, resetMs: 5000 })['Retry-After'];
    assert.equal(refused(1000), '1');
    assert.equal(refused(1001), '2');
    assert.equal(refused(1), '1');
    assert.equal(refused(0), '1');
  });

  test('a policy name is a valid sf-string even with quotes, backslashes or non-ASCII', () => {
    const headers = rateLimitHeaders({ name: 'a"b\\c→', limit: 1, windowMs: 1500 }, { allowed: true, limit: 1, remaining: 0, retryAfterMs: 0, resetMs: 1500 });
    assert.equal(headers['RateLimit-Policy'], '"a\\"b\\\\c?";q=1;w=2');
  });

  test('enforceRateLimit sets the headers when admitted and throws RATE_LIMITED with them when refused', async () => {
    const limiter = createMemoryRateLimiter(new ManualClock());
    const tight: RateLimitRule = { name: 'checkouts', limit: 1, windowMs: 60_000 };
    const set: Record<string, string> = {};
    await enforceRateLimit(limiter, tight, 'u', { header: (name, value) => (set[name] = value) });
    assert.deepEqual(set, { 'RateLimit-Policy': '"checkouts";q=1;w=60', RateLimit: '"checkouts";r=0;t=60' });
    await assert.rejects(enforceRateLimit(limiter, tight, 'u', { header: () => assert.fail('no headers on the reply') }), (err: unknown) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.code, 'RATE_LIMITED');
      assert.equal(err.status, 429);
      assert.deepEqual(err.headers, { 'RateLimit-Policy': '"checkouts";q=1;w=60', RateLimit: '"checkouts";r=0;t=60', 'Retry-After': '60' });
      return true;
    });
  });
});

const redisToFreeze = REDIS_UNDER_TEST;
if (redisToFreeze) {
  describe('rate limiter (Redis frozen past the command timeout)', () => {
    test('DESIGN §4 / issue 14 item 8: a hit whose caller gave up (503) never counts when Redis wakes', () =>
      withFreezableRedis(redisToFreeze, 'rl-frozen', async ({ client, prefix, freeze }) => {
        const limiter = createRedisRateLimiter({ client, prefix, clock: { now: () => new Date() } });
        const rule: RateLimitRule = { name: 'frozen', limit: 1, windowMs: 60_000 };
        // The hit is read and runs only after 2.5 s, past the 1 s command timeout.
        await freeze(2500);
        await assert.rejects(limiter.hit(rule, 'subject'), { code: 'SERVICE_UNAVAILABLE' });
        await delay(2000);
        const d = await limiter.hit(rule, 'subject');
        assert.equal(d.allowed, true, 'the abandoned hit did not use up the limit');
      }));
  });
}
