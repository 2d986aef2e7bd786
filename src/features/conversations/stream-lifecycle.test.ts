import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import type { OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { startOpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import {
  message,
  newUser,
  openStream,
  replyRow,
  saveKey,
  send,
  billingSpy,
  startOf,
  textOf,
  waitFor,
  type BillingSpy,
  userWithOpenAiKey,
} from '../../../test/kits/conversations.ts';

const HEARTBEAT_MS = 20;
// Only the idle-timeout tests run under it (their own instance); every other stream has the default
// 60 s, which no provider gap on a busy machine comes near.
const IDLE_MS = 2000;

describe('advisor stream: lifecycle', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let idle: TestApp;
  let base: string;
  let billing: BillingSpy;
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    billing = billingSpy();
    t = await buildTestApp({
      // No detach grace: the old rule, a client that goes ends its turn at once (DESIGN §12 tests the grace).
      env: { OPENAI_BASE_URL: fake.url, STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS), STREAM_DETACH_GRACE_MS: '0' },
      deps: { billing: billing.wrap },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    idle = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url, STREAM_IDLE_TIMEOUT_MS: String(IDLE_MS) }, shareWith: t });
  });
  after(async () => {
    await idle.close();
    await t.close();
    await fake.close();
  });

  const userWithKey = (tag: string): Promise<string> => userWithOpenAiKey(t, fake.validKey, tag);
  const settlesOf = (turnId: unknown) => billing.settles.filter((s) => s.charge.turnId === turnId).map((s) => s.produced);

  test('DESIGN §7 with STREAM_DETACH_GRACE_MS=0: a client that disconnects after 5 deltas → upstream closed within 1 s, reply stored interrupted with exactly those deltas, lease free', async () => {
    const user = await userWithKey('gone');
    // After the fifth piece the provider sends nothing more: only the service can end the call, and
    // the reply can hold nothing beyond what the client got.
    fake.enqueueStream({ chunks: Array.from({ length: 10 }, (_, i) => `w${i} `), delayMs: 100, stallAfterChunks: 5 });
    const seen = fake.streams.length;
    const live = openStream(base, await t.token(user), message());
    assert.equal(await live.status, 200);
    const got = await live.deltas(5);
    const cutAt = Date.now();
    live.destroy();
    const upstream = fake.streams[seen];
    assert.ok(upstream);
    const closedAt = await upstream.closed;
    assert.ok(closedAt - cutAt < 1000, `upstream closed ${closedAt - cutAt} ms after the client left`);
    assert.equal(upstream.closedByClient, true, 'the service, not the fake, ended the upstream call');
    const replyId = live.frames[0]?.data['assistantMessageId'];
    const stored = await waitFor('the interrupted reply', async () => {
      const row = await replyRow(t, String(replyId));
      return row?.status === 'streaming' ? undefined : row;
    });
    assert.deepEqual([stored.status, stored.content, stored.finish_reason], ['interrupted', got.join(''), 'aborted']);
    assert.deepEqual(settlesOf(replyId), [true]);
    assert.equal((await send(t, user, null, message())).statusCode, 200, 'the lease was released');
  });

  test('DESIGN §7: settle runs exactly once per turn; produced = at least one delta was sent', async () => {
    const user = await userWithKey('settle');
    fake.enqueueStream({ chunks: ['yes'] });
    const done = await send(t, user, null, message());
    fake.enqueueStream({ status: 500 });
    const failedEarly = await send(t, user, null, message());
    fake.enqueueStream({ chunks: ['half'], errorAfterChunks: 1 });
    const failedLate = await send(t, user, null, message());
    assert.deepEqual(settlesOf(startOf(done)['assistantMessageId']), [true]);
    assert.deepEqual(settlesOf(startOf(failedEarly)['assistantMessageId']), [false]);
    assert.deepEqual(settlesOf(startOf(failedLate)['assistantMessageId']), [true]);
  });

  test(`DESIGN §7: a ": ping" comment every STREAM_HEARTBEAT_MS (${HEARTBEAT_MS} ms) while the provider is slow`, async () => {
    const user = await userWithKey('ping');
    fake.enqueueStream({ chunks: ['a', 'b', 'c'], delayMs: 120 });
    const res = await send(t, user, null, message());
    assert.ok(res.pings >= 2, `only ${res.pings} pings`);
    assert.deepEqual(
      res.frames.map((f) => f.id),
      [1, 2, 3, 4, 5],
      'pings carry no id',
    );
    assert.equal(res.frames.at(-1)?.event, 'done');
  });

  test(`DESIGN §7: no byte from the provider for STREAM_IDLE_TIMEOUT_MS (${IDLE_MS} ms) after a chunk → error UPSTREAM_TIMEOUT; stored failed`, async () => {
    const user = await userWithKey('stall');
    fake.enqueueStream({ chunks: ['a', 'b'], stallAfterChunks: 1 });
    const res = await send(idle, user, null, message());
    assert.deepEqual(
      res.frames.map((f) => f.event),
      ['start', 'delta', 'error'],
    );
    assert.deepEqual([res.frames.at(-1)?.data['code'], res.frames.at(-1)?.data['retryable']], ['UPSTREAM_TIMEOUT', true]);
    const stored = await replyRow(idle, String(startOf(res)['assistantMessageId']));
    assert.deepEqual([stored?.status, stored?.content, stored?.error_code], ['failed', 'a', 'UPSTREAM_TIMEOUT']);
  });

  test('DESIGN §7: a provider that never answers the request → error UPSTREAM_TIMEOUT', async () => {
    const user = await userWithKey('silent');
    fake.enqueueStream({ stallBeforeHeaders: true });
    const res = await send(idle, user, null, message());
    assert.deepEqual(
      res.frames.map((f) => f.event),
      ['start', 'error'],
    );
    assert.equal(res.frames.at(-1)?.data['code'], 'UPSTREAM_TIMEOUT');
  });

  test('DESIGN §7: a slow provider whose gaps stay under the idle timeout is not timed out', async () => {
    const user = await userWithKey('slow');
    // Six gaps a quarter of the idle timeout: together 1.5 times it, each far below it on a busy machine.
    fake.enqueueStream({ chunks: ['a', 'b', 'c', 'd', 'e', 'f'], delayMs: IDLE_MS / 4 });
    const res = await send(idle, user, null, message());
    assert.equal(res.frames.at(-1)?.event, 'done');
    assert.equal(textOf(res), 'abcdef');
  });

  test('DESIGN §12 under faults: a reply left streaming by a crashed instance → 409 STREAM_IN_PROGRESS while its lease lives or its turn shows a sign of life; then, sent again, closed with the text its frame log holds and run again in its place, the cut turn’s charge given back (DESIGN §7); another such reply is left to the sweeper', async () => {
    const user = await userWithKey('crash');
    const body = message();
    fake.enqueueStream({ chunks: ['Half ', 'an answer'] });
    const first = await send(t, user, null, body);
    const orphan = String(startOf(first)['assistantMessageId']);
    const other = String(startOf(await send(t, user, null, message())).assistantMessageId);
    // As a dead instance leaves them: the replies streaming with nothing stored, the turns reserved; the
    // frame log holds what the clients were sent.
    const crash = async (aliveAt: Date): Promise<void> => {
      await t.deps.db
        .updateTable('messages')
        .set({ status: 'streaming', content: '', parts: null, finish_reason: null, completed_at: null, last_frame_id: null })
        .where('id', 'in', [orphan, other])
        .execute();
      await t.deps.db
        .updateTable('turn_charges')
        .set({ status: 'reserved', settled_at: null, alive_at: aliveAt })
        .where('turn_id', 'in', [orphan, other])
        .execute();
    };
    const longAgo = new Date(t.deps.clock.now().getTime() - 3_600_000);
    await crash(longAgo);
    const lease = await t.deps.leases.acquire(user, 30_000);
    assert.ok(lease);
    const whileLeased = await send(t, user, null, body);
    assert.deepEqual([whileLeased.statusCode, whileLeased.code], [409, 'STREAM_IN_PROGRESS']);
    await t.deps.leases.release(user, lease);
    // The lease's store forgot it (restarted empty), yet the turn shows signs of life: the database decides.
    await crash(new Date(t.deps.clock.now().getTime() + 3_600_000));
    const whileAlive = await send(t, user, null, body);
    assert.deepEqual([whileAlive.statusCode, whileAlive.code], [409, 'STREAM_IN_PROGRESS']);
    const otherTurn = await send(t, user, null, message());
    assert.deepEqual([otherTurn.statusCode, otherTurn.code], [409, 'STREAM_IN_PROGRESS'], 'the fence holds for a new turn too');

    await crash(longAgo);
    fake.enqueueStream({ chunks: ['A whole ', 'answer'] });
    const again = await send(t, user, null, body);
    assert.equal(again.statusCode, 200);
    assert.deepEqual([again.frames.at(0)?.event, again.frames.at(-1)?.event], ['start', 'done']);
    assert.equal(textOf(again), 'A whole answer');
    assert.equal(startOf(again)['conversationId'], startOf(first)['conversationId'], 'in the cut turn’s place');
    assert.equal(await replyRow(t, orphan), undefined, 'the cut turn was replaced');
    assert.equal((await t.deps.db.selectFrom('turn_charges').select('status').where('turn_id', '=', orphan).executeTakeFirstOrThrow()).status, 'returned');
    assert.equal((await replyRow(t, other))?.status, 'streaming', 'the sweeper closes the other one');
    // A silent reply does not hold the user back.
    assert.equal((await send(t, user, null, message())).statusCode, 200);
  });

  test('operations: stream metrics and the request metrics hook see streams', async () => {
    const user = await userWithKey('metrics');
    await send(t, user, null, message());
    const metrics = (await t.call('GET', '/metrics')).body;
    assert.match(metrics, /advisor_streams_open 0/);
    assert.match(metrics, /advisor_streams_total\{provider="openai",outcome="complete"\} [1-9]/);
    assert.match(metrics, /http_requests_total\{method="POST",route="\/api\/advisor\/conversations\/new\/messages\/stream",status="200"\} [1-9]/);
  });
});

describe('advisor stream: SIGTERM drain', () => {
  test('DESIGN §10: drain ends a live stream with error SHUTTING_DOWN, stores and settles it; new streams → 503 SERVICE_UNAVAILABLE with Retry-After (DESIGN §16)', async () => {
    const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    const billing = billingSpy();
    const t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url }, deps: { billing: billing.wrap } });
    try {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const user = newUser('drain');
      await saveKey(t, user, 'openai', fake.validKey);
      fake.enqueueStream({ chunks: ['a', 'b', 'c'], stallAfterChunks: 2 });
      const live = openStream(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, await t.token(user), message());
      await live.deltas(2);
      await t.deps.lifecycle.drain(50);
      await live.ended;
      assert.deepEqual(
        live.frames.map((f) => f.event),
        ['start', 'delta', 'delta', 'error'],
      );
      assert.deepEqual(live.frames.at(-1)?.data, { code: 'SHUTTING_DOWN', message: live.frames.at(-1)?.data['message'], retryable: true });
      const replyId = String(live.frames[0]?.data['assistantMessageId']);
      const stored = await replyRow(t, replyId);
      assert.deepEqual([stored?.status, stored?.content, stored?.error_code], ['interrupted', 'ab', 'SHUTTING_DOWN']);
      assert.deepEqual(
        billing.settles.map((s) => [s.charge.turnId, s.produced]),
        [[replyId, true]],
      );
      const refused = await send(t, user, null, message());
      assert.deepEqual([refused.statusCode, refused.code, refused.headers['retry-after']], [503, 'SERVICE_UNAVAILABLE', '1']);
    } finally {
      await t.close();
      await fake.close();
    }
  });
});
