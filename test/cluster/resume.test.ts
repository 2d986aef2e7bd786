// DESIGN §12 across real instances: a turn running on one instance is resumed, kept alive and stopped
// from others (Redis as the shared store; and PostgreSQL alone, LISTEN/NOTIFY, on two instances
// started without Redis), and a client following a turn whose instance is killed never hangs.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { attachStream, openStream, type Frame, type LiveStream } from '../kits/conversations.ts';
import { CLUSTER_AVAILABLE, WITHOUT_REDIS, clusterWithFakes, framesAtEnd, message, newUser, saveKey, waitFor } from './kit.ts';
import { CLUSTER_STORES_NAME, type Instance } from './cluster.ts';

const HEARTBEAT_MS = 200;
const GRACE_MS = 1500;

const ids = (frames: Frame[]): number[] => frames.map((f) => f.id ?? -1);
const ended = (s: LiveStream, timeoutMs = 15_000): Promise<Frame[]> => framesAtEnd(s, timeoutMs);
const chunks = (n: number): string[] => Array.from({ length: n }, (_, i) => `c${i} `);

if (CLUSTER_AVAILABLE) {
  describe(`streams across instances, ${CLUSTER_STORES_NAME} (DESIGN §12)`, () => {
    const setup = clusterWithFakes({
      STRIPE_WEBHOOK_SECRET: 'whsec_cluster_test',
      STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS),
      STREAM_DETACH_GRACE_MS: String(GRACE_MS),
    });
    const c = setup.cluster;
    let pgOnly: Instance[] = [];

    async function turnOn(
      instance: Instance,
      user: string,
      n: number,
      delayMs: number,
    ): Promise<{ post: LiveStream; conversationId: string; upstream: number }> {
      setup.fake.enqueueStream({ chunks: chunks(n), delayMs });
      const upstream = setup.fake.streams.length;
      const post = openStream(instance.url, await c().token(user), message());
      assert.equal(await post.status, 200);
      await post.deltas(2);
      return { post, conversationId: String(post.frames[0]?.data['conversationId']), upstream };
    }

    for (const store of ['Redis', 'PostgreSQL alone'] as const) {
      test(`DESIGN §12 (${store}): a client cut on one instance resumes on another with Last-Event-ID — every frame once, the same ids; the turn ran on`, async () => {
        if (store === 'PostgreSQL alone' && pgOnly.length === 0) pgOnly = [await c().startInstance(WITHOUT_REDIS), await c().startInstance(WITHOUT_REDIS)];
        const [one, two] = store === 'Redis' ? [c().instances[0], c().instances[1]] : [pgOnly[0], pgOnly[1]];
        assert.ok(one && two);
        const user = newUser('resume');
        await saveKey(c(), user, setup.fake.validKey);
        const { post, conversationId, upstream } = await turnOn(one, user, 12, 60);
        await post.deltas(4);
        post.destroy();
        const had = [...post.frames];
        const resumed = attachStream(two.url, await c().token(user), conversationId, had.at(-1)?.id);
        const rest = await ended(resumed);
        const all = [...had, ...rest];
        assert.deepEqual(
          ids(all),
          Array.from({ length: all.length }, (_, i) => i + 1),
          'no frame twice, none missing',
        );
        assert.equal(
          all
            .filter((f) => f.event === 'delta')
            .map((f) => f.data['text'])
            .join(''),
          chunks(12).join(''),
        );
        assert.equal(rest.at(-1)?.data['finishReason'], 'stop');
        assert.equal(setup.fake.streams[upstream]?.closedByClient, false, 'the provider call ran to its end');
      });

      test(`DESIGN §12 (${store}): a stop asked on a third instance aborts the provider call within a second and ends the streams attached on two instances with done "stopped"`, async () => {
        const [one, two, three] = store === 'Redis' ? c().instances : [pgOnly[0], pgOnly[1], pgOnly[0]];
        assert.ok(one && two && three);
        const user = newUser('stop');
        await saveKey(c(), user, setup.fake.validKey);
        const { post, conversationId, upstream } = await turnOn(one, user, 60, 100);
        const other = attachStream(two.url, await c().token(user), conversationId, 0);
        await other.deltas(2);
        const askedAt = Date.now();
        const res = await fetch(`${three.url}/api/advisor/conversations/${conversationId}/stop`, {
          method: 'POST',
          headers: { authorization: `Bearer ${await c().token(user)}` },
        });
        assert.equal(res.status, 202);
        const closedAt = await setup.fake.streams[upstream]?.closed;
        assert.ok(closedAt !== undefined && closedAt - askedAt < 1000, `upstream closed ${Number(closedAt) - askedAt} ms after the stop`);
        for (const s of [post, other]) assert.equal((await ended(s)).at(-1)?.data['finishReason'], 'stopped');
        assert.deepEqual(ids(other.frames), ids(post.frames));
        const [row] = await c().sql<{ status: string; finish_reason: string }>('select status, finish_reason from messages where id = $1', [
          post.frames[0]?.data['assistantMessageId'],
        ]);
        assert.deepEqual(row, { status: 'interrupted', finish_reason: 'stopped' });
      });
    }

    test(`DESIGN §12 detach grace: a client attached on another instance keeps the turn running past STREAM_DETACH_GRACE_MS (${GRACE_MS} ms) after the first client left`, async () => {
      const [one, two] = c().instances;
      assert.ok(one && two);
      const user = newUser('remote-attach');
      await saveKey(c(), user, setup.fake.validKey);
      const { post, conversationId, upstream } = await turnOn(one, user, 30, 120);
      const other = attachStream(two.url, await c().token(user), conversationId, 0);
      await other.deltas(3);
      post.destroy();
      const frames = await ended(other);
      assert.equal(frames.at(-1)?.data['finishReason'], 'stop', 'the turn ran to its end (about 3.6 s, over twice the grace)');
      assert.equal(setup.fake.streams[upstream]?.closedByClient, false);
    });

    test('DESIGN §12 under faults: an instance killed mid-turn — its own client resuming with its last id, a follower elsewhere and a fresh resume each end with a snapshot of the reply and error SHUTTING_DOWN at ids above any the dead instance sent (one id never names two frames), within a few heartbeats', async () => {
      const victim = await c().startInstance();
      const [, survivor] = c().instances;
      assert.ok(survivor);
      const user = newUser('killed');
      await saveKey(c(), user, setup.fake.validKey);
      // Deltas 5 ms apart: the dead instance has sent its own client frames of the last write interval that the log never got.
      const { post, conversationId } = await turnOn(victim, user, 4000, 5);
      const follower = attachStream(survivor.url, await c().token(user), conversationId, 0);
      await follower.deltas(3);
      await post.deltas(60);
      const killedAt = Date.now();
      await victim.kill('SIGKILL');
      await post.ended;
      const own = [...post.frames];
      const ownLast = own.at(-1)?.id ?? 0;
      const resumed = attachStream(survivor.url, await c().token(user), conversationId, ownLast);
      const [followed, resumedEnd] = await Promise.all([ended(follower, 10_000), ended(resumed, 10_000)]);
      assert.ok(Date.now() - killedAt < 10 * HEARTBEAT_MS + 3000, `ended ${Date.now() - killedAt} ms after the kill`);
      const CRASHED_TERMINAL_ID = 2_147_483_647;
      for (const [who, frames] of [
        ['follower', followed],
        ['own client resuming', resumedEnd],
      ] as const) {
        assert.deepEqual(
          frames.slice(-2).map((f) => [f.id, f.event, f.data['code']]),
          [
            [CRASHED_TERMINAL_ID - 1, 'snapshot', undefined],
            [CRASHED_TERMINAL_ID, 'error', 'SHUTTING_DOWN'],
          ],
          who,
        );
      }
      // The two ends agree on the text, and it is what the sweeper will store (the log's reply).
      const snapshotText = (frames: Frame[]): unknown => frames.at(-2)?.data['text'];
      assert.equal(snapshotText(resumedEnd), snapshotText(followed));
      // Every id the own client and the follower saw names one frame.
      const byId = new Map<number, string>();
      for (const f of [...own, ...followed, ...resumedEnd]) {
        const seen = byId.get(f.id ?? -1);
        const wire = JSON.stringify([f.event, f.data]);
        assert.ok(seen === undefined || seen === wire, `id ${f.id} named two frames: ${seen} and ${wire}`);
        byId.set(f.id ?? -1, wire);
      }
      // A fresh resume from 0 gets the same end, not a hang.
      const fresh = await ended(attachStream(survivor.url, await c().token(user), conversationId, 0), 10_000);
      assert.deepEqual(
        fresh.slice(-2).map((f) => [f.id, f.event]),
        [
          [CRASHED_TERMINAL_ID - 1, 'snapshot'],
          [CRASHED_TERMINAL_ID, 'error'],
        ],
      );
      // A client that has had the end is answered 204.
      const done = await fetch(`${survivor.url}/api/advisor/conversations/${conversationId}/stream`, {
        headers: { authorization: `Bearer ${await c().token(user)}`, 'last-event-id': String(CRASHED_TERMINAL_ID) },
      });
      assert.equal(done.status, 204);
      await done.body?.cancel();
      await waitFor(
        'nothing else died',
        async () => (c().instances.filter((i) => i !== victim && i.child.exitCode !== null).length === 0 ? true : undefined),
        1000,
      );
    });
  });
} else {
  test('multi-instance stream tests (DESIGN §12)', { skip: 'needs DATABASE_URL and REDIS_URL: npm run test:cluster' }, () => undefined);
}
