// Fault tests (DESIGN §4, §6, §7, §8, §10): real server processes sharing PostgreSQL and Redis while
// an instance is killed, database backends are terminated, Redis or PostgreSQL is cut away, or a
// provider goes silent. Registered only when DATABASE_URL and REDIS_URL are set
// (`npm run test:cluster`, or CI's second pass).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseFrames } from '../kits/conversations.ts';
import { makeStripeEvent, signStripePayload } from '../fakes/index.ts';
import { gate } from '../helpers/events.ts';
import {
  CLUSTER_AVAILABLE,
  PAID_MODEL,
  PAID_TURN_CREDITS,
  clusterWithFakes,
  grantCredits,
  lastFrame,
  liveInstances,
  message,
  money,
  newUser,
  outcome,
  saveKey,
  streamPath,
  tally,
  waitFor,
  walletsOffLedger,
  type ClusterWithFakes,
  type Outcome,
} from './kit.ts';
import { CLUSTER_STORES_NAME, CLUSTER_TEST_APPLICATION } from './cluster.ts';

// Only the tests of a provider that never answers run under these (an instance of their own); every
// other probe and stream is answered, under the defaults (60 s here for probes), which no busy machine
// comes near: with 1 s, ten key saves at once were stored unverified once the machine was loaded.
const PROBE_TIMEOUT_MS = 1000;
const IDLE_TIMEOUT_MS = 1500;
const WEBHOOK_SECRET = 'whsec_faults_test';
// Small so a crashed instance's reservation is settled within the test.
const SWEEP_AFTER_MS = 4000;
const SWEEP_INTERVAL_MS = 500;
const HEARTBEAT_MS = 1000;
const STALL_MS = 1000;
const DRAIN_MS = 2000;

/** A user with a verified key whose default model costs credits, and credits for `turns` turns. */
async function payingUser(setup: ClusterWithFakes, tag: string, turns: number): Promise<string> {
  const user = newUser(tag);
  await saveKey(setup.cluster(), user, setup.fake.validKey, PAID_MODEL);
  await grantCredits(setup.cluster(), user, turns * PAID_TURN_CREDITS);
  return user;
}

if (CLUSTER_AVAILABLE) {
  describe(`faults: three instances, ${CLUSTER_STORES_NAME}`, () => {
    const setup = clusterWithFakes({
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      // A client gone ends its turn at once here (the detach grace has its own suite, resume.test.ts).
      STREAM_DETACH_GRACE_MS: '0',
      PROVIDER_PROBE_TIMEOUT_MS: '60000',
      RESERVATION_SWEEP_AFTER_MS: String(SWEEP_AFTER_MS),
      RESERVATION_SWEEP_INTERVAL_MS: String(SWEEP_INTERVAL_MS),
      // A running turn shows it is alive at each heartbeat; the sweep age must cover three.
      STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS),
      STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
      SHUTDOWN_DRAIN_MS: String(DRAIN_MS),
    });
    const c = setup.cluster;

    /** Every instance that should be running is, and answers /healthz and /readyz. */
    async function assertAllServe(): Promise<void> {
      for (const [i, instance] of c().instances.entries()) {
        if (instance.child.signalCode === 'SIGKILL') continue;
        assert.equal(instance.child.exitCode, null, `instance ${i} exited:\n${instance.output()}`);
        assert.equal((await fetch(`${instance.url}/healthz`)).status, 200);
        assert.equal((await fetch(`${instance.url}/readyz`)).status, 200);
      }
    }

    const retryAfter = (o: Outcome): number => Number(o.headers.get('retry-after'));

    test('DESIGN §4: Redis down → key saves, stream starts and checkouts fail closed with 503 SERVICE_UNAVAILABLE and Retry-After; each recovers within 5 s of Redis returning', async () => {
      const live = liveInstances(c());
      // One user per instance, so the recovery polls of one instance never meet another's stream lease.
      const users = await Promise.all(
        live.map(async (i) => {
          const user = newUser(`redis-down-${i}`);
          await saveKey(c(), user, setup.fake.validKey);
          return user;
        }),
      );
      const routes = {
        'key save': (user: string, i: number) => c().call(user, 'PUT', '/api/advisor/provider-keys/openai', { apiKey: setup.fake.validKey }, i),
        'stream start': (user: string, i: number) => c().call(user, 'POST', streamPath(), message(), i),
        checkout: (user: string, i: number) => c().call(user, 'POST', '/api/billing/checkout', { packId: 'credits_500' }, i),
      };
      const [probes, upstream, checkouts] = [setup.fake.requests.length, setup.fake.streams.length, setup.stripe.checkouts.length];

      await c().redis.cut();
      let restoredAt = 0;
      try {
        const refused = await Promise.all(
          live.flatMap((i, n) => Object.entries(routes).map(async ([route, send]) => ({ route, i, res: await outcome(await send(users[n] ?? '', i)) }))),
        );
        for (const { route, i, res } of refused) {
          assert.deepEqual([res.status, res.code], [503, 'SERVICE_UNAVAILABLE'], `${route} on instance ${i}`);
          assert.ok(retryAfter(res) >= 1, `${route} on instance ${i}: Retry-After ${res.headers.get('retry-after')}`);
        }
        // Failing closed: no provider, no payment processor was called.
        assert.deepEqual([setup.fake.requests.length, setup.fake.streams.length, setup.stripe.checkouts.length], [probes, upstream, checkouts]);
        await assertAllServe();
      } finally {
        await c().redis.restore();
        restoredAt = performance.now();
      }

      // Each instance, each route: polled until it answers something other than 503.
      await Promise.all(
        live.map(async (i, n) => {
          for (const [route, send] of Object.entries(routes)) {
            const res = await waitFor(
              `${route} on instance ${i}`,
              async () => {
                const r = await outcome(await send(users[n] ?? '', i));
                return r.status === 503 ? undefined : r;
              },
              10_000,
              100,
            );
            const recoveredAfter = performance.now() - restoredAt;
            assert.equal(res.status, 200, `${route} on instance ${i}: ${res.status} ${res.code ?? ''}`);
            assert.ok(recoveredAfter < 5000, `${route} on instance ${i} recovered after ${Math.round(recoveredAfter)} ms`);
          }
        }),
      );
    });

    test('DESIGN §8: a Stripe webhook during a database outage → 503 SERVICE_UNAVAILABLE, instances stay up; the same delivery replayed after recovery credits once', async () => {
      const user = newUser('webhook-outage');
      const checkout = await outcome(await c().call(user, 'POST', '/api/billing/checkout', { packId: 'credits_500' }));
      assert.equal(checkout.status, 200);
      const sessionId = (checkout.json as { sessionId: string }).sessionId;
      const payload = JSON.stringify(makeStripeEvent('checkout.session.completed', setup.stripe.completeSession(sessionId)));
      const signature = signStripePayload(payload, WEBHOOK_SECRET);
      const deliver = async (i: number): Promise<Outcome> =>
        outcome(
          await fetch(`${c().instances[i]?.url}/api/billing/webhooks/stripe`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'stripe-signature': signature },
            body: payload,
          }),
        );
      const live = liveInstances(c());

      await c().dbProxy.stop();
      try {
        for (const i of live) {
          const res = await deliver(i);
          assert.deepEqual([res.status, res.code], [503, 'SERVICE_UNAVAILABLE'], `instance ${i}`);
          assert.ok(retryAfter(res) >= 1);
        }
        for (const i of live) {
          const instance = c().instances[i];
          assert.equal(instance?.child.exitCode, null, `instance ${i} exited:\n${instance?.output()}`);
          assert.equal((await fetch(`${instance?.url}/healthz`)).status, 200);
          assert.equal((await fetch(`${instance?.url}/readyz`)).status, 503);
        }
      } finally {
        await c().dbProxy.start(c().dbProxyPort);
      }

      // Stripe retries the same delivery (same bytes, same signature) until it gets a 2xx.
      const replayed = await waitFor(
        'the replayed delivery',
        async () => {
          const r = await deliver(live[0] ?? 0);
          return r.status === 503 ? undefined : r;
        },
        10_000,
        200,
      );
      assert.equal(replayed.status, 200, JSON.stringify(replayed.json));
      for (const i of live) assert.equal((await deliver(i)).status, 200);

      const m = await money(c(), user);
      assert.deepEqual(m, { balance: 500, ledgerSum: 500, apiCredits: 500, turnCharges: {} });
      const ledger = await c().sql('select kind, amount::int as amount, reference from ledger_entries where user_id = $1', [user]);
      assert.deepEqual(ledger, [{ kind: 'purchase', amount: 500, reference: `checkout:${sessionId}` }]);
      await assertAllServe();
    });

    test('DESIGN §8: PostgreSQL backends terminated 50 times while paid turns start → ledger = balance every time; every streamed turn stored and charged once; no reservation left reserved; every instance still serves', async () => {
      const TURNS_EACH = 20;
      const users = await Promise.all(Array.from({ length: 10 }, (_, i) => payingUser(setup, `terminated-${i}`, TURNS_EACH)));
      const live = liveInstances(c());
      const results: { user: string; res: Outcome }[] = [];
      const turn = async (user: string, i: number) => ({ user, res: await outcome(await c().call(user, 'POST', streamPath(), message(), i)) });
      for (let round = 0; round < 50; round++) {
        // Three users' turns at once, one per instance; the backends go at a random moment of their spend.
        const turns = live.map((i, k) => turn(users[(round * live.length + k) % users.length] ?? '', i));
        await sleep(Math.floor(Math.random() * 30));
        await c().sql(
          `select pg_terminate_backend(pid) from pg_stat_activity
            where datname = current_database() and pid <> pg_backend_pid() and application_name <> $1`,
          [CLUSTER_TEST_APPLICATION],
        );
        results.push(...(await Promise.all(turns)));
        assert.deepEqual(await walletsOffLedger(c()), [], `round ${round}: a wallet is off its ledger`);
        assert.deepEqual(await c().sql('select user_id from wallets where balance < 0'), [], `round ${round}: spending overdrew`);
      }
      // A request that meets a connection killed a moment ago answers 503 and the pool replaces it
      // (docs/decisions/operations.md "Lost database connections"): each instance is ready again soon after.
      for (const i of live) {
        const url = c().instances[i]?.url ?? '';
        await waitFor(
          `instance ${i} ready again after the terminations`,
          async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined),
          10_000,
          100,
        );
      }
      await assertAllServe();
      // Every instance still serves a paid turn end to end.
      for (const [k, i] of live.entries()) {
        const after = await turn(users[k] ?? '', i);
        assert.equal(after.res.status, 200, `instance ${i}: ${after.res.status} ${after.res.code ?? ''}`);
        results.push(after);
      }

      // A turn is served, or refused as a passing outage (fail closed, DESIGN §3/§8), never anything else.
      const counts = tally(results.map((r) => r.res));
      for (const key of Object.keys(counts)) assert.ok(['200', '503 SERVICE_UNAVAILABLE', '402 BILLING_NOT_AVAILABLE'].includes(key), JSON.stringify(counts));
      const served = results.filter((r) => r.res.status === 200);
      for (const { res } of served) {
        assert.deepEqual(
          res.frames.map((f) => f.event),
          ['start', 'delta', 'delta', 'done'],
        );
        assert.deepEqual(res.frames[0]?.data['billing'], { source: 'credits', credits: PAID_TURN_CREDITS });
      }
      // What the client was told is what is stored (DESIGN §7: the last frame comes after storage).
      const replies = await c().sql<{ id: string; status: string; content: string }>('select id, status, content from messages where id = any($1)', [
        served.map(({ res }) => String(res.frames[0]?.data['assistantMessageId'])),
      ]);
      assert.deepEqual(
        replies.filter((r) => r.status !== 'complete' || r.content !== 'Hello world'),
        [],
        'a reply the client saw complete is stored otherwise',
      );
      assert.equal(replies.length, served.length);

      // A reservation whose turn was refused after it committed is returned by the sweeper.
      await waitFor(
        'every reservation settled',
        async () => {
          const [open] = await c().sql<{ n: number }>("select count(*)::int as n from turn_charges where status = 'reserved' and user_id = any($1)", [users]);
          return open?.n === 0 ? true : undefined;
        },
        SWEEP_AFTER_MS + 10_000,
        250,
      );
      for (const user of users) {
        const streamed = served.filter((r) => r.user === user).length;
        const m = await money(c(), user);
        // Charged exactly for the turns it was served, once each (DESIGN §7: charged only if a delta was produced).
        assert.deepEqual(
          [m.balance, m.ledgerSum, m.apiCredits, m.turnCharges['charged'] ?? 0, m.turnCharges['reserved'] ?? 0],
          [(TURNS_EACH - streamed) * PAID_TURN_CREDITS, (TURNS_EACH - streamed) * PAID_TURN_CREDITS, (TURNS_EACH - streamed) * PAID_TURN_CREDITS, streamed, 0],
          `${user}: ${JSON.stringify(m)}`,
        );
      }
      process.stdout.write(`# outcomes of the terminated rounds: ${JSON.stringify(counts)}\n`);
    });

    test('issue 14 item 8: Redis frozen (SIGSTOP) 3 s while users start streams → each start is answered 503 within the command timeout; once Redis wakes, none holds a phantom lease: every next start is 200', async () => {
      const live = liveInstances(c());
      const users = await Promise.all(
        Array.from({ length: 6 }, async (_, n) => {
          const user = newUser(`redis-frozen-${n}`);
          await saveKey(c(), user, setup.fake.validKey);
          return user;
        }),
      );
      c().redis.signal('SIGSTOP');
      let woke = 0;
      try {
        const began = performance.now();
        const refused = await Promise.all(users.map(async (user, n) => outcome(await c().call(user, 'POST', streamPath(), message(), live[n % live.length]))));
        const slowest = performance.now() - began;
        for (const r of refused) assert.deepEqual([r.status, r.code], [503, 'SERVICE_UNAVAILABLE']);
        assert.ok(slowest < 2900, `the frozen Redis held a start for ${Math.round(slowest)} ms`);
        await sleep(Math.max(0, 3000 - slowest));
      } finally {
        c().redis.signal('SIGCONT');
        woke = performance.now();
      }
      // The abandoned acquires ran when Redis woke, and their undo right behind them.
      await sleep(1000);
      for (const [n, user] of users.entries()) {
        setup.fake.enqueueStream({ chunks: ['ok'] });
        const r = await outcome(await c().call(user, 'POST', streamPath(), message(), live[n % live.length]));
        assert.equal(r.status, 200, `user ${n} after Redis woke (${Math.round(performance.now() - woke)} ms): ${r.status} ${r.code ?? ''}`);
      }
    });

    // Redis restarted empty mid-stream: stream-faults.test.ts (the database fences a second stream).

    /** Polls /healthz on every live instance every 50 ms until stopped; returns the worst answer time (printed, not asserted). */
    function watchHealth(): { stop(): Promise<number> } {
      let worst = 0;
      let running = true;
      const loop = (async () => {
        while (running) {
          await Promise.all(
            liveInstances(c()).map(async (i) => {
              const t0 = performance.now();
              const res = await fetch(`${c().instances[i]?.url}/healthz`).catch(() => undefined);
              if (res?.status === 200) worst = Math.max(worst, performance.now() - t0);
            }),
          );
          await sleep(50);
        }
      })();
      return { stop: async () => ((running = false), await loop, worst) };
    }

    test('issue 14: PostgreSQL frozen 4 s as a paid stream ends → its end is stored and charged once after the thaw; ledger = wallet; nothing left streaming; /healthz answered throughout', async () => {
      const [i] = liveInstances(c());
      const user = await payingUser(setup, 'pg-frozen', 1);
      setup.fake.enqueueStream({ chunks: Array.from({ length: 8 }, (_, n) => `p${n} `), delayMs: 150 });
      const res = await c().call(user, 'POST', streamPath(), message(), i);
      assert.equal(res.status, 200);
      const health = watchHealth();
      let worst = 0;
      let result: Awaited<ReturnType<typeof outcome>>;
      try {
        await sleep(300);
        c().dbProxy.freeze();
        try {
          // The stream's deltas keep flowing (no database on that path); its end waits for the database.
          await sleep(4000);
        } finally {
          c().dbProxy.thaw();
        }
        result = await outcome(res);
      } finally {
        worst = await health.stop();
      }
      process.stdout.write(`# /healthz worst answer during the PostgreSQL freeze: ${Math.round(worst)} ms\n`);
      assert.equal(lastFrame(result)?.event, 'done', JSON.stringify(lastFrame(result)));
      const turnId = String(result.frames[0]?.data['assistantMessageId']);
      const [reply] = await c().sql('select status, content from messages where id = $1', [turnId]);
      assert.deepEqual(reply, { status: 'complete', content: Array.from({ length: 8 }, (_, n) => `p${n} `).join('') });
      const m = await money(c(), user);
      assert.deepEqual(m, { balance: 0, ledgerSum: 0, apiCredits: 0, turnCharges: { charged: 1 } });
    });

    test('issue 14 with STREAM_DETACH_GRACE_MS=0: a stream client that stops reading is cut off after STREAM_STALL_TIMEOUT_MS: its reply stored interrupted, charged by what was sent, its lease free', async () => {
      const [i] = liveInstances(c());
      const user = await payingUser(setup, 'stalled-reader', 2);
      // Still streaming when the client is cut off (the turn no longer waits for its clients, DESIGN §12):
      // the provider holds the last tenth back until the reply is stored, however slow the machine.
      const piece = 'y'.repeat(32 * 1024);
      const stored = gate();
      setup.fake.enqueueStream({ chunks: Array.from({ length: 1000 }, () => piece), delayMs: 2, hold: { afterChunks: 900, until: stored.opened } });
      const url = new URL(c().instances[i ?? 0]?.url ?? '');
      const body = JSON.stringify(message());
      const socket = net.connect(Number(url.port), url.hostname);
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.pause();
      socket.write(
        `POST ${streamPath()} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${await c().token(user)}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      try {
        const [reply] = await waitFor(
          'the stalled reply to end',
          async () => {
            const rows = await c().sql<{ status: string; content_length: number }>(
              "select status, length(content) as content_length from messages where user_id = $1 and role = 'assistant' and status <> 'streaming'",
              [user],
            );
            return rows.length > 0 ? rows : undefined;
          },
          STALL_MS + 10_000,
          100,
        );
        assert.equal(reply?.status, 'interrupted');
        assert.ok((reply?.content_length ?? 0) > 0);
        setup.fake.enqueueStream({ chunks: ['next'] });
        // On a loaded machine a start can find Redis slower than its bound and be refused 503 (fail closed,
        // nothing taken): sent again then, for a few seconds, far below the lease's 30 s. A lease left
        // held is answered 409 STREAM_IN_PROGRESS as soon as Redis answers, and fails the test.
        const next = await waitFor(
          'the next start',
          async () => {
            const r = await outcome(await c().call(user, 'POST', streamPath(), message(), i));
            if (r.status === 503) return undefined;
            return r;
          },
          8000,
          500,
        );
        assert.deepEqual([next.status, next.code], [200, undefined], 'the lease was freed');
        const m = await money(c(), user);
        assert.deepEqual(m, { balance: 0, ledgerSum: 0, apiCredits: 0, turnCharges: { charged: 2 } });
      } finally {
        stored.open();
        socket.destroy();
      }
    });

    test('issue 14: an 18 MB JSON body on a small route → 413 at once, and /healthz stays answered', async () => {
      const user = newUser('oversized');
      const big = JSON.stringify({ name: 'x', nested: Array.from({ length: 400_000 }, () => ({ a: [1, 2, 3], b: 'abcdefghijklmnopqrstuvwxyz' })) });
      assert.ok(big.length > 18_000_000, String(big.length));
      const health = watchHealth();
      let res: Awaited<ReturnType<typeof outcome>>;
      let took: number;
      try {
        const began = performance.now();
        res = await outcome(await c().call(user, 'POST', '/api/accounts', JSON.parse(big)));
        took = performance.now() - began;
      } finally {
        const worst = await health.stop();
        process.stdout.write(`# /healthz worst answer while the oversized body arrived: ${Math.round(worst)} ms\n`);
      }
      process.stdout.write(`# oversized body answered in ${Math.round(took)} ms\n`);
      assert.deepEqual([res.status, res.code], [413, 'PAYLOAD_TOO_LARGE']);
      await assertAllServe();
    });

    test('issue 14: SIGTERM with live paid streams and a slow-body connection → the instance exits 0 within the drain bound; every stream ends with SHUTTING_DOWN, stored and charged (none left streaming); ledger = wallet', async () => {
      const [i] = liveInstances(c());
      if (i === undefined) throw new Error('no live instance');
      const instance = c().instances[i];
      const users = await Promise.all(Array.from({ length: 3 }, async (_, n) => payingUser(setup, `sigterm-${n}`, 1)));
      const streams = await Promise.all(
        users.map(async (user) => {
          setup.fake.enqueueStream({ chunks: Array.from({ length: 100 }, (_, n) => `s${n} `), delayMs: 100 });
          const res = await c().call(user, 'POST', streamPath(), message(), i);
          assert.equal(res.status, 200);
          return res;
        }),
      );
      // A client trickling a request body, one byte every 200 ms.
      const url = new URL(instance?.url ?? '');
      const slow = net.connect(Number(url.port), url.hostname);
      slow.on('error', () => undefined);
      await new Promise<void>((resolve) => slow.once('connect', resolve));
      slow.write(`POST /api/accounts HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{`);
      const trickle = setInterval(() => slow.write(' '), 200);
      try {
        await sleep(500);
        const began = performance.now();
        const code = await instance?.kill('SIGTERM');
        const took = performance.now() - began;
        process.stdout.write(`# SIGTERM: exited ${code} after ${Math.round(took)} ms\n`);
        assert.equal(code, 0);
        assert.ok(took < DRAIN_MS + 3000, `exited ${Math.round(took)} ms after SIGTERM`);
        const outcomes = await Promise.all(streams.map((r) => outcome(r)));
        for (const o of outcomes) assert.deepEqual([lastFrame(o)?.event, lastFrame(o)?.data['code']], ['error', 'SHUTTING_DOWN']);
        for (const user of users) {
          const rows = await c().sql<{ status: string }>("select status from messages where user_id = $1 and role = 'assistant'", [user]);
          assert.deepEqual(rows, [{ status: 'interrupted' }]);
          assert.deepEqual(await money(c(), user), { balance: 0, ledgerSum: 0, apiCredits: 0, turnCharges: { charged: 1 } });
        }
      } finally {
        clearInterval(trickle);
        slow.destroy();
        // Any test after this one still finds three instances.
        await c().startInstance();
      }
    });

    test('DESIGN §4/§8: kill -9 of an instance mid-stream before any delta → a new stream starts on another instance within 60 s; the sweeper closes the reply interrupted and returns the turn (nothing was produced)', async () => {
      const [victim, other] = liveInstances(c());
      if (victim === undefined || other === undefined) throw new Error('two live instances are needed');
      const user = await payingUser(setup, 'killed', 2);
      setup.fake.enqueueStream({ stallBeforeHeaders: true });
      const upstreamBefore = setup.fake.streams.length;
      const res = await c().call(user, 'POST', streamPath(), message(), victim);
      assert.equal(res.status, 200);
      const start = await firstFrame(res);
      assert.equal(start.event, 'start');
      const turnId = String(start.data['assistantMessageId']);
      // The provider has been called: the turn is reserved and its reply stored as streaming.
      await waitFor('the upstream call', async () => (setup.fake.streams.length > upstreamBefore ? true : undefined), 5000, 10);
      try {
        await c().instances[victim]?.kill('SIGKILL');
        const killedAt = performance.now();

        // Every 2.5 s, so the polls stay far below the 30 starts per minute.
        const next = await waitFor(
          'a new stream on another instance',
          async () => {
            const r = await outcome(await c().call(user, 'POST', streamPath(), message(), other));
            if (r.status === 200) return r;
            // 503: a store slower than its bound on a loaded machine (nothing taken): asked again.
            if (r.status !== 503) assert.deepEqual([r.status, r.code], [409, 'STREAM_IN_PROGRESS']);
            return undefined;
          },
          60_000,
          2500,
        );
        const freedAfter = performance.now() - killedAt;
        assert.ok(freedAfter < 60_000, `the lease freed after ${Math.round(freedAfter)} ms`);
        assert.equal(lastFrame(next)?.event, 'done');

        await waitFor(
          'the killed turn returned by the sweeper',
          async () => {
            const [row] = await c().sql<{ status: string }>('select status from turn_charges where turn_id = $1', [turnId]);
            return row?.status === 'returned' ? true : undefined;
          },
          SWEEP_AFTER_MS + 10_000,
          250,
        );
        const [reply] = await c().sql('select status, error_code from messages where id = $1', [turnId]);
        assert.deepEqual(reply, { status: 'interrupted', error_code: 'SHUTTING_DOWN' });
        const m = await money(c(), user);
        assert.deepEqual(m, {
          balance: PAID_TURN_CREDITS,
          ledgerSum: PAID_TURN_CREDITS,
          apiCredits: PAID_TURN_CREDITS,
          turnCharges: { charged: 1, returned: 1 },
        });
        const [returned] = await c().sql('select amount::int as amount from ledger_entries where reference = $1', [`turn-return:${turnId}`]);
        assert.deepEqual(returned, { amount: PAID_TURN_CREDITS });
      } finally {
        await res.body?.cancel().catch(() => undefined);
        // Any test after this one still finds three instances.
        await c().startInstance();
      }
    });
  });

  describe('faults: a provider that never answers (one instance)', () => {
    const setup = clusterWithFakes(
      { STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, PROVIDER_PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS), STREAM_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS) },
      1,
    );
    const c = setup.cluster;

    test('DESIGN §6: provider blackholed → key save answers 200 verified:false after PROVIDER_PROBE_TIMEOUT_MS', async () => {
      const user = newUser('blackhole-key');
      setup.fake.setProbe('stall');
      try {
        const startedAt = performance.now();
        const res = await outcome(await c().call(user, 'PUT', '/api/advisor/provider-keys/openai', { apiKey: setup.fake.validKey }));
        const elapsed = performance.now() - startedAt;
        assert.equal(res.status, 200, JSON.stringify(res.json));
        assert.deepEqual([(res.json as { verified: boolean }).verified, (res.json as { lastVerifiedAt: unknown }).lastVerifiedAt], [false, null]);
        // The rule is about time: the probe gave up at the configured timeout, not the 5 s default.
        assert.ok(elapsed >= PROBE_TIMEOUT_MS - 50 && elapsed < 5000, `answered after ${Math.round(elapsed)} ms`);
      } finally {
        setup.fake.setProbe('ok');
      }
    });

    test('DESIGN §7: upstream silent for STREAM_IDLE_TIMEOUT_MS → error frame UPSTREAM_TIMEOUT; reply stored failed; charged only if a delta was sent', async () => {
      const user = await payingUser(setup, 'blackhole-stream', 2);
      setup.fake.enqueueStream({ stallBeforeHeaders: true });
      const startedAt = performance.now();
      const silent = await outcome(await c().call(user, 'POST', streamPath(), message()));
      const elapsed = performance.now() - startedAt;
      assert.equal(silent.status, 200);
      assert.deepEqual(
        silent.frames.map((f) => f.event),
        ['start', 'error'],
      );
      assert.deepEqual(lastFrame(silent)?.data, { code: 'UPSTREAM_TIMEOUT', message: 'The provider sent nothing for too long', retryable: true });
      assert.ok(elapsed >= IDLE_TIMEOUT_MS - 50 && elapsed < 10_000, `ended after ${Math.round(elapsed)} ms`);

      setup.fake.enqueueStream({ chunks: ['Half', ' an answer'], stallAfterChunks: 1 });
      const partial = await outcome(await c().call(user, 'POST', streamPath(), message()));
      assert.deepEqual(
        partial.frames.map((f) => f.event),
        ['start', 'delta', 'error'],
      );
      assert.equal(lastFrame(partial)?.data['code'], 'UPSTREAM_TIMEOUT');

      const replies = await c().sql(`select status, content, error_code from messages where user_id = $1 and role = 'assistant' order by created_at`, [user]);
      assert.deepEqual(replies, [
        { status: 'failed', content: '', error_code: 'UPSTREAM_TIMEOUT' },
        { status: 'failed', content: 'Half', error_code: 'UPSTREAM_TIMEOUT' },
      ]);
      const m = await money(c(), user);
      assert.deepEqual(m, {
        balance: PAID_TURN_CREDITS,
        ledgerSum: PAID_TURN_CREDITS,
        apiCredits: PAID_TURN_CREDITS,
        turnCharges: { returned: 1, charged: 1 },
      });
    });
  });
} else {
  // Reported as skipped rather than as a file that passed with nothing in it.
  test('fault tests (three server processes)', { skip: 'needs DATABASE_URL and REDIS_URL: npm run test:cluster' }, () => undefined);
}

/** Reads a live event stream until its first frame, leaving the rest unread. */
async function firstFrame(res: Response): Promise<{ event: string; data: Record<string, unknown> }> {
  const reader = res.body?.getReader();
  if (!reader) throw new Error('no body');
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`stream ended before its first frame: ${buffer}`);
    buffer += decoder.decode(value, { stream: true });
    const end = buffer.indexOf('\n\n');
    if (end >= 0) {
      reader.releaseLock();
      const frame = parseFrames(buffer.slice(0, end + 2)).frames[0];
      if (!frame) throw new Error(`not a frame: ${buffer}`);
      return frame;
    }
  }
}
