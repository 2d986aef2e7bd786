// DESIGN §15 on a real Redis Cluster of three masters (npm run test:redis-cluster): every key one
// operation touches lies in one slot — the user's or the turn's hash tag — and limits stay exact when
// the users' windows lie on different masters.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { withFreezableRedis } from '../../test/helpers/frozen-redis.ts';
import { adminRedis, deleteKeys, openReadyRedis, REDIS_UNDER_TEST } from '../../test/helpers/redis.ts';
import { ManualClock } from '../../test/helpers/manual-clock.ts';
import { unusedPort } from '../../test/helpers/net.ts';
import { wireOf } from './frames.ts';
import type { RateLimitRule } from './rate-limiter.ts';
import { closeRedis, openRedis, turnTag, userTag } from './redis-connection.ts';
import { createRedisFrameStore } from './redis-frame-store.ts';
import { createRedisRateLimiter } from './redis-rate-limiter.ts';
import { createRedisStreamLeases } from './redis-stream-leases.ts';

const cluster = REDIS_UNDER_TEST?.clusterNodes ? REDIS_UNDER_TEST : undefined;

test("DESIGN §15: with REDIS_CLUSTER_NODES and REDIS_URL both set, every cluster node takes REDIS_URL's user, password and TLS", async () => {
  const client = openRedis({ url: 'rediss://app:p%40ss@ignored.example:6380/0', clusterNodes: [{ host: '127.0.0.1', port: await unusedPort() }] });
  try {
    assert.ok(client instanceof Cluster);
    const { username, password, tls } = client.options.redisOptions ?? {};
    assert.deepEqual({ username, password, tls }, { username: 'app', password: 'p@ss', tls: {} });
  } finally {
    client.disconnect();
  }
});

if (!cluster) {
  test('Redis Cluster (three masters)', { skip: 'needs a Redis Cluster: npm run test:redis-cluster' }, () => undefined);
} else {
  describe('DESIGN §15: a Redis Cluster of three masters', () => {
    const prefix = `test:cluster:${randomBytes(6).toString('hex')}:`;
    const admin = adminRedis(cluster);
    after(async () => {
      await deleteKeys(cluster, prefix);
      await admin.quit();
    });
    const slotOf = async (key: string): Promise<number> => Number(await admin.call('cluster', 'keyslot', key));
    /** The port of the master that serves a slot. */
    const masterOf = async (slot: number): Promise<number> => {
      const ranges = (await admin.call('cluster', 'slots')) as [number, number, [string, number]][];
      const range = ranges.find(([from, to]) => slot >= from && slot <= to);
      assert.ok(range, `slot ${slot} is served`);
      return range[2][1];
    };
    const keysUnder = async (): Promise<string[]> => {
      assert.ok(admin instanceof Cluster);
      const found = await Promise.all(admin.nodes('master').map((node) => node.keys(`${prefix}*`)));
      return found.flat();
    };

    test("DESIGN §15: every key of one user's operations (rate-limit windows of two rules, the stream lease) lies in the slot of {u:<user>}, every key of one turn's log in the slot of {t:<turn>}", async () => {
      const client = await openReadyRedis(cluster);
      try {
        const user = `user-${randomBytes(6).toString('hex')}`;
        const turn = `turn-${randomBytes(6).toString('hex')}`;
        const limiter = createRedisRateLimiter({ client, prefix, clock: new ManualClock() });
        await limiter.hit({ name: 'streams', limit: 30, windowMs: 60_000 }, user);
        await limiter.hit({ name: 'key-saves', limit: 10, windowMs: 3_600_000 }, user);
        assert.notEqual(await createRedisStreamLeases({ client, prefix }).acquire(user, 30_000), null);
        const frames = createRedisFrameStore({ client, prefix, onError: () => undefined });
        try {
          const outcome = await frames.write(turn, { after: 0, frames: [{ id: 1, wire: wireOf(1, 'start', '{}') }], end: false }, 60_000, true);
          assert.deepEqual(outcome, { kind: 'written' });
          assert.equal((await frames.read(turn, 0))?.frames.length, 1);
        } finally {
          await frames.close();
        }
        const keys = await keysUnder();
        const userKeys = keys.filter((k) => k.includes(userTag(user)));
        const turnKeys = keys.filter((k) => k.includes(turnTag(turn)));
        assert.equal(userKeys.length, 3, JSON.stringify(keys));
        assert.equal(turnKeys.length, 1, JSON.stringify(keys));
        const [userSlot, turnSlot] = [await slotOf(userTag(user)), await slotOf(turnTag(turn))];
        for (const k of userKeys) assert.equal(await slotOf(k), userSlot, k);
        for (const k of turnKeys) assert.equal(await slotOf(k), turnSlot, k);
      } finally {
        await closeRedis(client);
      }
    });

    /** Users whose keys lie on every master: the first one found on each, then `more` others. */
    const usersOnEveryMaster = async (more: number): Promise<string[]> => {
      const firstOn = new Map<number, string>();
      const others: string[] = [];
      while (firstOn.size < 3 || others.length < more) {
        const user = `user-${randomBytes(6).toString('hex')}`;
        const master = await masterOf(await slotOf(userTag(user)));
        if (!firstOn.has(master)) firstOn.set(master, user);
        else others.push(user);
      }
      return [...firstOn.values(), ...others.slice(0, more)];
    };

    test('DESIGN §12 / §15 under faults: masters that hang while the client opens its connections to them → every call is answered 503 before they wake (a call refused on an opening connection, which the cluster client retries through slot refreshes, included); acquires that ran late are taken back', () =>
      withFreezableRedis(cluster, 'cluster-hang', async ({ client, prefix, freeze }) => {
        const users = await usersOnEveryMaster(0);
        const leases = createRedisStreamLeases({ client, prefix });
        // The client has one master's connection open (its first command); the others open on first use.
        await freeze(8000);
        const first = users.map((u) => leases.acquire(u, 30_000));
        // A moment later those connections are opening (their handshakes hang): a command sent now is refused.
        await delay(50);
        const second = users.map((u) => leases.acquire(u, 30_000));
        const outcomes = await Promise.allSettled([...first, ...second]);
        assert.deepEqual(
          outcomes.map((o) => (o.status === 'rejected' ? (o.reason as { code?: string }).code : `answered ${String(o.value)}`)),
          outcomes.map(() => 'SERVICE_UNAVAILABLE'),
          'answered only once the masters woke (8 s): the call was not bounded',
        );
        // Once they wake, whatever ran late is released: every user can take its lease.
        for (const user of users) {
          for (let tries = 0; ; tries++) {
            if ((await leases.acquire(user, 30_000).catch(() => null)) !== null) break;
            assert.ok(tries < 200, `${user}: a late acquire was never taken back`);
            await delay(100);
          }
        }
      }));

    test('DESIGN §15: on a 3-master Redis Cluster, 5 users × 500 concurrent hits (their windows on all three masters) from 3 instances against a limit of 100 → exactly 100 admitted for each user', async () => {
      const users = await usersOnEveryMaster(2);
      const rule: RateLimitRule = { name: 'cluster-burst', limit: 100, windowMs: 60_000 };
      // Three instances whose connections are up, as a deployed instance's are before its traffic.
      const clients = await Promise.all([openReadyRedis(cluster), openReadyRedis(cluster), openReadyRedis(cluster)]);
      try {
        const limiters = clients.map((client) => createRedisRateLimiter({ client, prefix, clock: new ManualClock() }));
        const hits = users.flatMap((user) => Array.from({ length: 500 }, (_, i) => ({ user, limiter: limiters[i % 3] })));
        const decisions = await Promise.all(hits.map(async ({ user, limiter }) => ({ user, allowed: (await limiter?.hit(rule, user))?.allowed })));
        const admitted = Object.fromEntries(users.map((u) => [u, decisions.filter((d) => d.user === u && d.allowed === true).length]));
        assert.deepEqual(admitted, Object.fromEntries(users.map((u) => [u, 100])));
      } finally {
        await Promise.all(clients.map((c) => closeRedis(c)));
      }
    });
  });
}
