import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'kysely';
import { withFreezableRedis } from '../../test/helpers/frozen-redis.ts';
import { ManualClock } from '../../test/helpers/manual-clock.ts';
import { createDb, type DbHandle } from '../db/create-db.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { createMemoryStreamLeases } from './memory-stream-leases.ts';
import { createPgStreamLeases } from './pg-stream-leases.ts';
import { createRedisStreamLeases } from './redis-stream-leases.ts';
import { closeRedis } from './redis-connection.ts';
import type { StreamLeases } from './stream-lease.ts';
import { REDIS_UNDER_TEST, deleteKeys, openReadyRedis } from '../../test/helpers/redis.ts';
import type { RedisEndpoint } from '../config.ts';
import { migratedEmbeddedDb } from '../../test/helpers/pglite-template.ts';

// Backends that need a service are registered only when it is configured.
const { DATABASE_URL } = process.env;

/** Two lease instances sharing one store, as two service instances would. */
interface Instances {
  readonly a: StreamLeases;
  readonly b: StreamLeases;
  /** Lets `ms` of lease time pass. */
  elapse(ms: number): Promise<void>;
  close(): Promise<void>;
}

interface Backend {
  readonly name: string;
  /** Lease ttl for the tests; short and real where the store keeps its own time. */
  readonly ttlMs: number;
  /** Expiry is timed by the store in real time, so boundaries are checked with a margin. */
  readonly realTime: boolean;
  before?(): Promise<void>;
  after?(): Promise<void>;
  open(): Promise<Instances>;
}

const MINUTE = 60_000;

const memory: Backend = {
  name: 'memory',
  ttlMs: MINUTE,
  realTime: false,
  async open() {
    const clock = new ManualClock();
    const leases = createMemoryStreamLeases(clock);
    return { a: leases, b: leases, elapse: async (ms) => clock.advance(ms), close: () => leases.close() };
  },
};

function pgBackend(name: string, connect: () => Promise<DbHandle>, cleanup?: (h: DbHandle) => Promise<void>): Backend {
  const handles: DbHandle[] = [];
  return {
    name,
    ttlMs: MINUTE,
    realTime: false,
    async before() {
      // Two pools, as two instances would have (PGlite is in-process, so one).
      const first = await connect();
      handles.push(first, name === 'PGlite' ? first : await connect());
      await migrateToLatest(first.db);
    },
    async after() {
      const [first] = handles;
      if (first && cleanup) await cleanup(first);
      await Promise.all([...new Set(handles)].map((h) => h.close()));
    },
    async open() {
      const [one, two] = handles;
      if (!one || !two) throw new Error('not set up');
      const clock = new ManualClock();
      return {
        a: createPgStreamLeases(one.db, clock),
        b: createPgStreamLeases(two.db, clock),
        elapse: async (ms) => clock.advance(ms),
        close: async () => undefined,
      };
    },
  };
}

function redisBackend(url: RedisEndpoint): Backend {
  const prefix = `test:lease:${randomBytes(6).toString('hex')}:`;
  return {
    name: url.clusterNodes ? 'Redis Cluster' : 'Redis',
    // PX expiry is timed by Redis, which an injected clock cannot move: real ttls, short, yet far longer
    // than a busy machine takes between two commands (the checks just inside the ttl come ttl/4 in).
    ttlMs: 1000,
    realTime: true,
    async after() {
      await deleteKeys(url, prefix);
    },
    async open() {
      const [ca, cb] = await Promise.all([openReadyRedis(url), openReadyRedis(url)]);
      const a = createRedisStreamLeases({ client: ca, prefix });
      const b = createRedisStreamLeases({ client: cb, prefix });
      return { a, b, elapse: (ms) => delay(ms), close: async () => void (await Promise.all([closeRedis(ca), closeRedis(cb)])) };
    },
  };
}

const backends: Backend[] = [memory, pgBackend('PGlite', () => migratedEmbeddedDb())];
if (DATABASE_URL) {
  const schema = `test_lease_${randomBytes(6).toString('hex')}`;
  backends.push(
    pgBackend(
      'PostgreSQL',
      () => createDb({ databaseUrl: DATABASE_URL, schema }),
      async (h) => void (await sql`drop schema ${sql.id(schema)} cascade`.execute(h.db)),
    ),
  );
}
if (REDIS_UNDER_TEST) backends.push(redisBackend(REDIS_UNDER_TEST));

const uniqueUser = () => `user-${randomBytes(6).toString('hex')}`;

for (const backend of backends) {
  describe(`stream leases (${backend.name})`, () => {
    before(() => backend.before?.());
    after(() => backend.after?.());

    const ttl = backend.ttlMs;
    // Points just inside and just past the ttl: exact on a manual clock, with a margin in real time.
    const inside = backend.realTime ? ttl / 4 : ttl - 1;
    const pastFromInside = backend.realTime ? ttl : 1;

    async function withInstances(body: (i: Instances) => Promise<void>): Promise<void> {
      const instances = await backend.open();
      try {
        await body(instances);
      } finally {
        await instances.close();
      }
    }

    test('DESIGN §4: one stream per user — of 20 concurrent acquires across instances exactly one gets a token', () =>
      withInstances(async ({ a, b }) => {
        const user = uniqueUser();
        const tokens = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).acquire(user, ttl)));
        assert.equal(tokens.filter((t) => t !== null).length, 1);
        assert.notEqual(await a.acquire(uniqueUser(), ttl), null, 'another user is not blocked');
      }));

    test('DESIGN §4: release by a token that does not hold the lease is a no-op', () =>
      withInstances(async ({ a, b }) => {
        const user = uniqueUser();
        const token = await a.acquire(user, ttl);
        assert.ok(token);
        await b.release(user, 'not-the-token');
        assert.equal(await b.acquire(user, ttl), null, 'still held');
        await b.release(user, token);
        assert.notEqual(await a.acquire(user, ttl), null, 'released by its holder');
      }));

    test('DESIGN §4: a lease a crashed instance holds expires after its ttl', () =>
      withInstances(async ({ a, b, elapse }) => {
        const user = uniqueUser();
        assert.ok(await a.acquire(user, ttl));
        await elapse(inside);
        assert.equal(await b.acquire(user, ttl), null, 'held just inside the ttl');
        await elapse(pastFromInside);
        assert.notEqual(await b.acquire(user, ttl), null, 'free once the ttl has passed');
      }));

    test('DESIGN §4: renewing keeps the lease past its first ttl', () =>
      withInstances(async ({ a, b, elapse }) => {
        const user = uniqueUser();
        const token = await a.acquire(user, ttl);
        assert.ok(token);
        await elapse(inside);
        assert.equal(await a.renew(user, token, ttl), true);
        await elapse(inside);
        assert.equal(await b.acquire(user, ttl), null, 'still held after the original ttl');
        assert.equal(await a.renew(user, token, ttl), true);
      }));

    test("DESIGN §4: a lease that vanished (expired, or a store restarted empty) is taken back by its holder's renewal, so no second stream starts beside it", () =>
      withInstances(async ({ a, b, elapse }) => {
        const user = uniqueUser();
        const token = await a.acquire(user, ttl);
        assert.ok(token);
        await elapse(ttl + (backend.realTime ? ttl / 2 : 0));
        assert.equal(await a.renew(user, token, ttl), true, 'expired, nobody took it: taken back');
        assert.equal(await b.acquire(user, ttl), null, 'held again');
        await a.release(user, token);
        assert.equal(await a.renew(user, token, ttl), true, 'gone from the store: set again for its holder');
        assert.equal(await b.acquire(user, ttl), null);
      }));

    test('DESIGN §4: renew of a lease another holder took returns false and disturbs the new holder in no way', () =>
      withInstances(async ({ a, b, elapse }) => {
        const user = uniqueUser();
        const old = await a.acquire(user, ttl);
        assert.ok(old);
        await elapse(ttl + (backend.realTime ? ttl / 2 : 0));
        const taken = await b.acquire(user, ttl);
        assert.ok(taken);
        assert.equal(await a.renew(user, old, ttl), false, 'lost to another holder');
        await a.release(user, old);
        assert.equal(await a.acquire(user, ttl), null, "the old holder's release left the new lease alone");
        assert.equal(await b.renew(user, taken, ttl), true);
      }));
  });
}

const redisToFreeze = REDIS_UNDER_TEST;
if (redisToFreeze) {
  describe('stream leases (Redis frozen past the command timeout)', () => {
    test('DESIGN §4 / issue 14 item 8: an acquire whose caller gave up (503) never takes effect when Redis wakes: no phantom lease', () =>
      withFreezableRedis(redisToFreeze, 'lease-frozen', async ({ client, prefix, freeze }) => {
        const leases = createRedisStreamLeases({ client, prefix });
        const user = uniqueUser();
        // The SET is read and runs only after 2.5 s, past the 1 s command timeout.
        await freeze(2500);
        await assert.rejects(leases.acquire(user, 30_000), { code: 'SERVICE_UNAVAILABLE' });
        await delay(2000);
        const token = await leases.acquire(user, 30_000);
        assert.notEqual(token, null, 'the user can stream: the abandoned acquire left no lease');
      }));
  });
}
