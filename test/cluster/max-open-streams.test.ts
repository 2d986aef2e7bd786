// DESIGN §16, admission before exhaustion: an instance whose descriptor limit is lowered (prlimit) refuses
// the stream beyond MAX_OPEN_STREAMS — derived from that limit — with a clean 503 + Retry-After, long
// before a descriptor runs out: never a reset connection, never EMFILE.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { attachStream, openStream, type LiveStream } from '../kits/conversations.ts';
import { defaultMaxOpenStreams } from '../../src/platform/descriptors.ts';
import type { Instance } from './cluster.ts';
import { CLUSTER_AVAILABLE, clusterWithFakes, message, newUser, outcome, saveKey, streamPath, waitFor } from './kit.ts';

const NOFILE = 512;
const POOL = 20;

/** A sample of the instance's /metrics (loopback: no token needed). */
async function sample(instance: Instance, name: string): Promise<number> {
  const text = await (await fetch(`${instance.url}/metrics`)).text();
  const line = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (!line?.[1]) throw new Error(`no ${name} in /metrics`);
  return Number(line[1]);
}

describe('MAX_OPEN_STREAMS under a lowered descriptor limit (DESIGN §16)', { skip: !CLUSTER_AVAILABLE && 'needs DATABASE_URL and redis-server' }, () => {
  const setup = clusterWithFakes({ STRIPE_WEBHOOK_SECRET: 'whsec_cluster_test' }, 0);
  let instance: Instance;
  const streams: LiveStream[] = [];
  before(async () => {
    instance = await setup
      .cluster()
      .startInstance({ DATABASE_POOL_SIZE: String(POOL), STREAM_IDLE_TIMEOUT_MS: '600000', STREAM_DETACH_GRACE_MS: '0' }, [
        'prlimit',
        `--nofile=${NOFILE}:${NOFILE}`,
      ]);
  });
  after(() => {
    for (const s of streams) s.destroy();
  });

  test('DESIGN §16: streams up to the limit derived from RLIMIT_NOFILE open; the next attach and start → 503 SERVICE_UNAVAILABLE with Retry-After, no reset, no EMFILE', async () => {
    const max = defaultMaxOpenStreams(NOFILE, POOL);
    assert.equal(await sample(instance, 'process_max_fds'), NOFILE);
    assert.equal(await sample(instance, 'advisor_max_open_streams'), max);

    // One live turn that stays open (the provider stalls after its first chunk), followed by max − 1 attaches.
    const user = newUser('max-streams');
    await saveKey(setup.cluster(), user, setup.fake.validKey);
    setup.fake.enqueueStream({ chunks: ['Half', ' an answer'], stallAfterChunks: 1 });
    const token = await setup.cluster().token(user);
    const post = openStream(instance.url, token, message());
    streams.push(post);
    assert.equal(await post.status, 200);
    await post.deltas(1);
    const conversationId = String(post.frames[0]?.data['conversationId']);
    for (let i = 1; i < max; i += 50) {
      const batch = Array.from({ length: Math.min(50, max - i) }, () => attachStream(instance.url, token, conversationId));
      streams.push(...batch);
      assert.deepEqual(new Set(await Promise.all(batch.map((s) => s.status))), new Set([200]));
    }
    await waitFor(
      'every follower has the first delta',
      async () => (streams.every((s) => s.frames.some((f) => f.event === 'delta')) ? true : undefined),
      60_000,
    );
    assert.equal(await sample(instance, 'advisor_open_streams'), max);

    // One more of each kind: refused in HTTP, with Retry-After.
    const attach = await outcome(
      await fetch(`${instance.url}/api/advisor/conversations/${conversationId}/stream`, { headers: { authorization: `Bearer ${token}` } }),
    );
    assert.equal(attach.status, 503);
    assert.equal(attach.code, 'SERVICE_UNAVAILABLE');
    assert.equal(attach.headers.get('retry-after'), '1');
    const other = newUser('max-streams-other');
    const start = await outcome(
      await fetch(`${instance.url}${streamPath()}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await setup.cluster().token(other)}`, 'content-type': 'application/json' },
        body: JSON.stringify(message()),
      }),
    );
    assert.equal(start.status, 503);
    assert.equal(start.code, 'SERVICE_UNAVAILABLE');
    assert.equal(start.headers.get('retry-after'), '1');
    assert.equal(await sample(instance, 'advisor_streams_refused_total'), 2);

    // Refused with descriptors to spare; everything open stays open, the instance stays ready.
    assert.ok((await sample(instance, 'process_open_fds')) < NOFILE - 100);
    assert.equal((await fetch(`${instance.url}/readyz`)).status, 200);
    assert.equal(streams.filter((s) => s.frames.some((f) => f.event === 'done' || f.event === 'error')).length, 0);
    assert.doesNotMatch(instance.output(), /EMFILE/);
    // The 80 % warning, once.
    await waitFor('the warning in the log', async () => (/streams open: past 80 %/.test(instance.output()) ? true : undefined), 10_000);
    assert.equal(instance.output().match(/streams open: past 80 %/g)?.length, 1);

    // A closed stream frees its slot.
    streams.pop()?.destroy();
    await waitFor('a slot is free', async () => ((await sample(instance, 'advisor_open_streams')) === max - 1 ? true : undefined), 10_000);
    const again = attachStream(instance.url, token, conversationId);
    streams.push(again);
    assert.equal(await again.status, 200);
  });

  test('DESIGN §16: a start whose client left holds its slot while its turn runs on (detach grace); MAX_OPEN_STREAMS=1 → the next start 503 SERVICE_UNAVAILABLE until the turn is stopped', async () => {
    const one = await setup.cluster().startInstance({ MAX_OPEN_STREAMS: '1', STREAM_IDLE_TIMEOUT_MS: '600000', STREAM_DETACH_GRACE_MS: '600000' });
    const user = newUser('slot-held');
    await saveKey(setup.cluster(), user, setup.fake.validKey);
    setup.fake.enqueueStream({ chunks: ['Half', ' an answer'], stallAfterChunks: 1 });
    const token = await setup.cluster().token(user);
    const post = openStream(one.url, token, message());
    assert.equal(await post.status, 200);
    await post.deltas(1);
    const conversationId = String(post.frames[0]?.data['conversationId']);
    post.destroy();
    await post.ended;
    // The turn runs on without its client: its slot stays taken.
    const other = newUser('slot-held-other');
    const start = async () =>
      outcome(
        await fetch(`${one.url}${streamPath()}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${await setup.cluster().token(other)}`, 'content-type': 'application/json' },
          body: JSON.stringify(message()),
        }),
      );
    const refused = await start();
    assert.equal(refused.status, 503);
    assert.equal(refused.code, 'SERVICE_UNAVAILABLE');
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(await sample(one, 'advisor_open_streams'), 1);
    // Stopped, the turn ends and gives its slot back.
    const stop = await setup
      .cluster()
      .call(user, 'POST', `/api/advisor/conversations/${conversationId}/stop`, undefined, setup.cluster().instances.indexOf(one));
    assert.equal(stop.status, 202);
    await waitFor('the slot is free', async () => ((await sample(one, 'advisor_open_streams')) === 0 ? true : undefined), 30_000);
    // The other user has no key: past admission now, refused by the start itself.
    const admitted = await start();
    assert.equal(admitted.status, 409);
    assert.equal(admitted.code, 'PROVIDER_KEY_NOT_CONFIGURED');
  });
});
