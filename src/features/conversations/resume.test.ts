// DESIGN §12: streams that survive the connection — attach (resume), stop, detach grace, bounds —
// through the HTTP API on real sockets, on whichever stores the run has (embedded, PostgreSQL, Redis).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { Agent, EventSource, type Dispatcher } from 'undici';
import { startOpenAiCompatibleFake, type OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { buildTestApp, codeOf, type TestApp } from '../../../test/helpers/app.ts';
import { turnStatus } from '../../../test/kits/billing.ts';
import { gate } from '../../../test/helpers/events.ts';
import type { StreamLeases } from '../../platform/stream-lease.ts';
import {
  attachStream,
  message,
  openStream,
  replyRow,
  send,
  startOf,
  textOf,
  userWithOpenAiKey,
  waitFor,
  type Frame,
  type LiveStream,
} from '../../../test/kits/conversations.ts';

// Short, for the two tests that wait for them to run out (their own instance); every other test runs
// on the defaults (30 s, 10 min), which a client coming back on a busy machine never outlasts.
const GRACE_MS = 800;
const RETENTION_MS = 1000;
const LOG_MAX_BYTES = 1024;

/** A request's headers (an object, or a flat array of names and values) with one more. */
function withHeader(headers: Dispatcher.DispatchOptions['headers'], name: string, value: string): Record<string, string | string[] | undefined> {
  const out: Record<string, string | string[] | undefined> = {};
  if (Array.isArray(headers)) for (let i = 0; i + 1 < headers.length; i += 2) out[String(headers[i])] = headers[i + 1] as string | string[];
  else if (headers) Object.assign(out, headers);
  out[name] = value;
  return out;
}

const idsOf = (frames: Frame[]): number[] => frames.map((f) => f.id ?? -1);
const textsOf = (frames: Frame[]): string =>
  frames
    .filter((f) => f.event === 'delta')
    .map((f) => String(f.data['text']))
    .join('');

describe('advisor stream: resume, stop, detach grace (DESIGN §12)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let base: string;
  /** An app of its own with the short grace and retention (an embedded second instance would share t's frame log). */
  let short: TestApp;
  let shortBase: string;
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url, STREAM_LOG_MAX_BYTES: String(LOG_MAX_BYTES) } });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    short = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url, STREAM_DETACH_GRACE_MS: String(GRACE_MS), STREAM_LOG_RETENTION_MS: String(RETENTION_MS) } });
    shortBase = await short.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await short.close();
    await t.close();
    await fake.close();
  });

  const user = (tag: string, app = t): Promise<string> => userWithOpenAiKey(app, fake.validKey, tag);
  const chunks = (n: number, size = 4): string[] => Array.from({ length: n }, (_, i) => `${String(i).padStart(size - 1, '0')} `);
  /**
   * A turn streaming slowly on `app` (t unless said): its POST stream, its conversation, its upstream
   * call, and when the service saw the POST's client go. With `hold`, the provider sends nothing past
   * `afterChunks` pieces until the test opens the gate.
   */
  async function slowTurn(
    u: string,
    n: number,
    delayMs: number,
    opts: { app?: TestApp; hold?: { afterChunks: number; until: Promise<unknown> } } = {},
  ): Promise<{ post: LiveStream; conversationId: string; upstream: NonNullable<OpenAiCompatibleFake['streams'][number]>; clientGone: Promise<void> }> {
    const app = opts.app ?? t;
    fake.enqueueStream({ chunks: chunks(n), delayMs, ...(opts.hold ? { hold: opts.hold } : {}) });
    const seen = fake.streams.length;
    const clientGone = new Promise<void>((resolve) => app.app.server.once('request', (_req, res) => res.once('close', () => resolve())));
    const post = openStream(app === t ? base : shortBase, await app.token(u), message());
    assert.equal(await post.status, 200);
    await post.deltas(1);
    const upstream = fake.streams[seen];
    assert.ok(upstream);
    return { post, conversationId: String(post.frames[0]?.data['conversationId']), upstream, clientGone };
  }
  const ended = async (s: LiveStream): Promise<Frame[]> => {
    await s.ended;
    return s.frames;
  };

  test('DESIGN §12: GET …/stream with Last-Event-ID (header or ?lastEventId=) gets the frames after it, then live ones, with the ids and data of the original stream', async () => {
    const u = await user('resume');
    // The turn waits at its fourth piece until all three clients are attached: what follows is live for them.
    const attached = gate();
    const { post, conversationId } = await slowTurn(u, 12, 40, { hold: { afterChunks: 4, until: attached.opened } });
    await post.deltas(3);
    const token = await t.token(u);
    const byHeader = attachStream(base, token, conversationId, 2);
    const byQuery = attachStream(base, token, conversationId, 3, 'query');
    const fromStart = attachStream(base, token, conversationId);
    assert.deepEqual(await Promise.all([byHeader.status, byQuery.status, fromStart.status]), [200, 200, 200]);
    attached.open();
    const original = await ended(post);
    assert.equal(original.at(-1)?.event, 'done');
    assert.deepEqual(
      await ended(byHeader),
      original.filter((f) => (f.id ?? 0) > 2),
    );
    assert.deepEqual(
      await ended(byQuery),
      original.filter((f) => (f.id ?? 0) > 3),
    );
    assert.deepEqual(await ended(fromStart), original, 'no Last-Event-ID: from the first frame');
    assert.deepEqual(
      idsOf(original),
      Array.from({ length: original.length }, (_, i) => i + 1),
    );
  });

  test('DESIGN §12 detach grace: a client that reconnects within STREAM_DETACH_GRACE_MS gets every frame it missed; the turn ran on (a new turn meanwhile → 409 STREAM_IN_PROGRESS), stored complete, charged once', async () => {
    const u = await user('reload');
    // The turn waits at its sixth piece until the client is back: it is still running when the new turn
    // is asked for and when the client reattaches, however slow the machine.
    const back = gate();
    const { post, conversationId, upstream, clientGone } = await slowTurn(u, 10, 60, { hold: { afterChunks: 6, until: back.opened } });
    await post.deltas(3);
    post.destroy();
    await clientGone;
    assert.equal((await send(t, u, null, message())).code, 'STREAM_IN_PROGRESS', 'the detached turn holds the lease');
    const seen = post.frames;
    const lastId = seen.at(-1)?.id ?? 0;
    const reattached = attachStream(base, await t.token(u), conversationId, lastId);
    assert.equal(await reattached.status, 200);
    back.open();
    const rest = await ended(reattached);
    assert.equal(upstream.closedByClient, false, 'the provider call ran to its end');
    const all = [...seen, ...rest];
    assert.deepEqual(
      idsOf(all),
      Array.from({ length: all.length }, (_, i) => i + 1),
      'no frame twice, none missing',
    );
    assert.equal(textsOf(all), chunks(10).join(''));
    assert.equal(rest.at(-1)?.event, 'done');
    assert.equal(rest.at(-1)?.data['finishReason'], 'stop');
    const replyId = String(seen[0]?.data['assistantMessageId']);
    const row = await replyRow(t, replyId);
    assert.deepEqual([row?.status, row?.content], ['complete', chunks(10).join('')]);
    assert.equal(await turnStatus(t, replyId), 'charged');
  });

  test(`DESIGN §12 detach grace: with no client for STREAM_DETACH_GRACE_MS (${GRACE_MS} ms) the provider call is aborted within a second, the reply stored interrupted, the lease freed`, async () => {
    const u = await user('grace', short);
    const { post, upstream } = await slowTurn(u, 40, 100, { app: short });
    await post.deltas(2);
    const cutAt = Date.now();
    post.destroy();
    const closedAt = await upstream.closed;
    assert.equal(upstream.closedByClient, true, 'the service ended the upstream call');
    assert.ok(closedAt - cutAt >= GRACE_MS - 50, `aborted ${closedAt - cutAt} ms after the client left, before the grace ended`);
    assert.ok(closedAt - cutAt < GRACE_MS + 1000, `aborted ${closedAt - cutAt} ms after the client left`);
    const replyId = String(post.frames[0]?.data['assistantMessageId']);
    const row = await waitFor('the reply to settle', async () => {
      const r = await replyRow(short, replyId);
      return r?.status === 'streaming' ? undefined : r;
    });
    assert.deepEqual([row.status, row.finish_reason], ['interrupted', 'aborted']);
    assert.ok(row.content.startsWith(chunks(2).join('')));
    fake.enqueueStream({ chunks: ['next'] });
    assert.equal((await send(short, u, null, message())).statusCode, 200, 'the lease was released');
  });

  test('DESIGN §12 stop: POST …/stop → 202; the provider call is aborted within a second; every attached stream ends with done finishReason "stopped"; stored interrupted and charged (a delta was produced); a second stop → 200 with the status', async () => {
    const u = await user('stop');
    const { post, conversationId, upstream } = await slowTurn(u, 40, 100);
    const other = attachStream(base, await t.token(u), conversationId, 0);
    await other.deltas(2);
    const askedAt = Date.now();
    const res = await t.call('POST', `/api/advisor/conversations/${conversationId}/stop`, { user: u });
    assert.equal(res.statusCode, 202, res.body);
    assert.deepEqual(res.json(), { status: 'streaming' });
    const closedAt = await upstream.closed;
    assert.ok(closedAt - askedAt < 1000, `upstream closed ${closedAt - askedAt} ms after the stop`);
    assert.equal(upstream.closedByClient, true);
    for (const s of [post, other]) {
      const last = (await ended(s)).at(-1);
      assert.equal(last?.event, 'done');
      assert.equal(last?.data['finishReason'], 'stopped');
    }
    assert.deepEqual(idsOf(other.frames), idsOf(post.frames), 'the same frames, the same ids');
    const replyId = String(post.frames[0]?.data['assistantMessageId']);
    const row = await replyRow(t, replyId);
    assert.deepEqual([row?.status, row?.finish_reason, row?.content], ['interrupted', 'stopped', textOf({ frames: post.frames } as never)]);
    assert.equal(await turnStatus(t, replyId), 'charged');
    const again = await t.call('POST', `/api/advisor/conversations/${conversationId}/stop`, { user: u });
    assert.equal(again.statusCode, 200);
    assert.deepEqual(again.json(), { status: 'interrupted' });
    // An idempotent retry of the stopped message replays it as it ended.
    const replay = attachStream(base, await t.token(u), conversationId, 0);
    assert.equal((await ended(replay)).at(-1)?.data['finishReason'], 'stopped');
  });

  test('DESIGN §12 stop before the first delta: stored interrupted, nothing charged (the reservation is returned)', async () => {
    const u = await user('stop-early');
    fake.enqueueStream({ chunks: ['never'], stallAfterChunks: 0 });
    const post = openStream(base, await t.token(u), message());
    assert.equal(await post.status, 200);
    await waitFor('the start frame', () => (post.frames.length > 0 ? true : undefined));
    const conversationId = String(startOf({ frames: post.frames } as never)['conversationId']);
    assert.equal((await t.call('POST', `/api/advisor/conversations/${conversationId}/stop`, { user: u })).statusCode, 202);
    const last = (await ended(post)).at(-1);
    assert.equal(last?.data['finishReason'], 'stopped');
    const replyId = String(post.frames[0]?.data['assistantMessageId']);
    assert.equal((await replyRow(t, replyId))?.status, 'interrupted');
    assert.equal(await turnStatus(t, replyId), 'returned');
  });

  test('issue 41 item 8, DESIGN §2: a token in the URL (?access_token=) is no token — 401 UNAUTHENTICATED on the attach route and everywhere, as without one', async () => {
    const u = await user('query-token');
    fake.enqueueStream({ chunks: ['stored'] });
    const conversationId = String(startOf(await send(t, u, null, message()))['conversationId']);
    const token = await t.token(u);
    const stream = `/api/advisor/conversations/${conversationId}/stream`;
    // The owner with the header: the route answers (the ended turn's frames).
    assert.equal((await t.call('GET', stream, { user: u })).statusCode, 200);
    for (const [method, url, headers] of [
      ['GET', `${stream}?access_token=${token}`, {}],
      ['GET', `${stream}?lastEventId=1&access_token=${token}`, {}],
      ['GET', `${stream}?access_token=${token}`, { 'last-event-id': '1' }],
      // A header that is no bearer token does not let the URL's token through either.
      ['GET', `${stream}?access_token=${token}`, { authorization: 'Bearer garbage' }],
      ['GET', `${stream}?access_token=${token}`, { authorization: `Basic ${token}` }],
      ['GET', `/api/accounts?access_token=${token}`, {}],
      ['GET', `/api/advisor/conversations/${conversationId}?access_token=${token}`, {}],
      ['POST', `/api/advisor/conversations/${conversationId}/stop?access_token=${token}`, {}],
    ] as const) {
      const res = await t.call(method, url, { headers });
      assert.deepEqual([res.statusCode, codeOf(res)], [401, 'UNAUTHENTICATED'], `${url} ${JSON.stringify(headers)}`);
    }
    const none = await t.call('GET', stream);
    assert.deepEqual([none.statusCode, codeOf(none)], [401, 'UNAUTHENTICATED'], 'the same answer as no token at all');
  });

  test('DESIGN §12: owner only — another user’s or an unknown conversation → 404 CONVERSATION_NOT_FOUND on attach and stop; no token → 401; a malformed Last-Event-ID → 400 VALIDATION_ERROR', async () => {
    const u = await user('owner');
    fake.enqueueStream({ chunks: ['mine'] });
    const conversationId = String(startOf(await send(t, u, null, message()))['conversationId']);
    const stranger = await user('stranger');
    for (const id of [conversationId, randomUUID()]) {
      const attach = await t.call('GET', `/api/advisor/conversations/${id}/stream`, { user: stranger });
      assert.deepEqual([attach.statusCode, codeOf(attach)], [404, 'CONVERSATION_NOT_FOUND']);
      const stop = await t.call('POST', `/api/advisor/conversations/${id}/stop`, { user: stranger });
      assert.deepEqual([stop.statusCode, codeOf(stop)], [404, 'CONVERSATION_NOT_FOUND']);
    }
    const anonymous = await t.call('GET', `/api/advisor/conversations/${conversationId}/stream`);
    assert.deepEqual([anonymous.statusCode, codeOf(anonymous)], [401, 'UNAUTHENTICATED']);
    const anonymousStop = await t.call('POST', `/api/advisor/conversations/${conversationId}/stop`);
    assert.deepEqual([anonymousStop.statusCode, codeOf(anonymousStop)], [401, 'UNAUTHENTICATED']);
    for (const bad of ['-1', 'abc', '1.5']) {
      const res = await t.call('GET', `/api/advisor/conversations/${conversationId}/stream`, { user: u, headers: { 'last-event-id': bad } });
      assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], bad);
    }
    const badQuery = await t.call('GET', `/api/advisor/conversations/${conversationId}/stream?lastEventId=x`, { user: u });
    assert.deepEqual([badQuery.statusCode, codeOf(badQuery)], [400, 'VALIDATION_ERROR']);
  });

  test('DESIGN §12: 204 when no turn ever ran, and when the client already has the terminal frame; an ended turn replays from its log', async () => {
    const u = await user('ended');
    fake.enqueueStream({ chunks: ['a', 'b'] });
    const done = await send(t, u, null, message());
    const conversationId = String(startOf(done)['conversationId']);
    const lastId = done.frames.at(-1)?.id ?? 0;
    const tail = attachStream(base, await t.token(u), conversationId, lastId - 2);
    assert.deepEqual(await ended(tail), done.frames.slice(-2));
    assert.equal(
      (await t.call('GET', `/api/advisor/conversations/${conversationId}/stream`, { user: u, headers: { 'last-event-id': String(lastId) } })).statusCode,
      204,
    );
    // A conversation with no turn (not reachable through the API, where a conversation starts with its first message).
    const empty = randomUUID();
    await t.deps.db
      .insertInto('conversations')
      .values({
        id: empty,
        user_id: u,
        title: 'empty',
        provider: 'openai',
        model: 'gpt-4o-mini',
        persona_id: null,
        message_count: 0,
        last_message_at: new Date(),
        created_at: new Date(),
        updated_at: new Date(),
      })
      .execute();
    assert.equal((await t.call('GET', `/api/advisor/conversations/${empty}/stream`, { user: u })).statusCode, 204);
    assert.deepEqual((await t.call('POST', `/api/advisor/conversations/${empty}/stop`, { user: u })).json(), { status: null });
  });

  test(`DESIGN §12 bound: past STREAM_LOG_MAX_BYTES (${LOG_MAX_BYTES}) a client resuming from an id the log no longer holds gets one snapshot frame with the reply so far, then the frames after it`, async () => {
    const u = await user('snapshot');
    const pieces = Array.from({ length: 30 }, (_, i) => `${i}:${'x'.repeat(60)} `);
    // The turn waits after 25 pieces until the late client has its snapshot: it is still streaming then.
    const resumed = gate();
    fake.enqueueStream({ chunks: pieces, delayMs: 15, hold: { afterChunks: 25, until: resumed.opened } });
    const post = openStream(base, await t.token(u), message());
    await post.deltas(25);
    const conversationId = String(post.frames[0]?.data['conversationId']);
    const late = attachStream(base, await t.token(u), conversationId, 1);
    await waitFor('the snapshot', () => (late.frames.length > 0 ? true : undefined));
    resumed.open();
    const frames = await ended(late);
    const original = await ended(post);
    const [snap, ...rest] = frames;
    assert.equal(snap?.event, 'snapshot');
    assert.equal(snap?.data['status'], 'streaming');
    assert.equal(snap?.data['assistantMessageId'], original[0]?.data['assistantMessageId']);
    assert.equal(String(snap?.data['text']) + textsOf(rest), pieces.join(''), 'snapshot + what follows = the whole reply');
    assert.deepEqual(
      rest,
      original.filter((f) => (f.id ?? 0) > (snap?.id ?? 0)),
      'then exactly the frames after the snapshot’s id',
    );
  });

  test(`DESIGN §12 retention: after STREAM_LOG_RETENTION_MS (${RETENTION_MS} ms) the stored reply comes as a snapshot and its terminal frame, with ids that follow the client’s; 204 once it has the terminal id`, async () => {
    const u = await user('retention', short);
    fake.enqueueStream({ chunks: ['kept ', 'in ', 'the ', 'database'] });
    const done = await send(short, u, null, message());
    const conversationId = String(startOf(done)['conversationId']);
    await delay(RETENTION_MS + 300);
    const late = await ended(attachStream(shortBase, await short.token(u), conversationId, 2));
    const terminalId = done.frames.at(-1)?.id ?? 0;
    assert.deepEqual(
      late.map((f) => [f.id, f.event]),
      [
        [terminalId - 1, 'snapshot'],
        [terminalId, 'done'],
      ],
    );
    assert.deepEqual([late[0]?.data['status'], late[0]?.data['text']], ['complete', 'kept in the database']);
    assert.deepEqual(late[1]?.data, done.frames.at(-1)?.data);
    // A client that had every frame but the terminal one gets just that, under its own id.
    const lastOne = await ended(attachStream(shortBase, await short.token(u), conversationId, terminalId - 1));
    assert.deepEqual(
      lastOne.map((f) => [f.id, f.event]),
      [[terminalId, 'done']],
    );
    assert.equal(
      (await short.call('GET', `/api/advisor/conversations/${conversationId}/stream`, { user: u, headers: { 'last-event-id': String(terminalId) } }))
        .statusCode,
      204,
    );
  });

  test('DESIGN §12: attaching never counts toward the 30 / 60 s message limit', async () => {
    const u = await user('no-count');
    fake.enqueueStream({ chunks: ['one'] });
    const first = await send(t, u, null, message());
    const conversationId = String(startOf(first)['conversationId']);
    for (let i = 0; i < 35; i++) {
      const res = await t.call('GET', `/api/advisor/conversations/${conversationId}/stream`, {
        user: u,
        headers: { 'last-event-id': String(first.frames.at(-1)?.id) },
      });
      assert.equal(res.statusCode, 204);
    }
    fake.enqueueStream({ chunks: ['two'] });
    const second = await send(t, u, conversationId, message());
    assert.equal(second.statusCode, 200);
    assert.match(String(second.headers['ratelimit']), /;r=28;/, 'two messages counted, no attach');
  });

  test('DESIGN §12: an EventSource client (the token in its Authorization header) gets every frame once, reconnects with its own Last-Event-ID after the end, and stops on the 204', async () => {
    const u = await user('eventsource');
    fake.enqueueStream({ chunks: chunks(6), delayMs: 20 });
    const post = openStream(base, await t.token(u), message());
    await post.deltas(1);
    const conversationId = String(post.frames[0]?.data['conversationId']);
    const seenHeaders: (string | undefined)[] = [];
    const onRequest = (req: { url?: string; headers: Record<string, string | string[] | undefined> }): void => {
      if (req.url?.includes(`/conversations/${conversationId}/stream`)) seenHeaders.push(req.headers['last-event-id'] as string | undefined);
    };
    t.app.server.on('request', onRequest);
    // The token as a header on every request of the EventSource (issue 41 item 8: never in the URL).
    const authorization = `Bearer ${await t.token(u)}`;
    const dispatcher = new Agent().compose(
      (dispatch) => (opts, handler) => dispatch({ ...opts, headers: withHeader(opts.headers, 'authorization', authorization) }, handler),
    );
    const es = new EventSource(`${base}/api/advisor/conversations/${conversationId}/stream`, { dispatcher });
    const got: { id: string; event: string }[] = [];
    // The connection's own `error` events (closed, reconnecting) are plain events; frames are MessageEvents.
    for (const event of ['start', 'delta', 'done', 'error', 'snapshot']) {
      es.addEventListener(event, (e) => void ('lastEventId' in e && got.push({ id: (e as MessageEvent).lastEventId, event })));
    }
    await waitFor('the EventSource to stop', () => (es.readyState === EventSource.CLOSED ? true : undefined));
    t.app.server.off('request', onRequest);
    const original = await ended(post);
    assert.deepEqual(
      got,
      original.map((f) => ({ id: String(f.id), event: f.event })),
    );
    assert.deepEqual(seenHeaders, [undefined, String(original.at(-1)?.id)], 'the reconnect carried the last id and got 204');
    await dispatcher.close();
  });
});

describe('advisor stream: the drain and detached turns (DESIGN §12)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    // The default grace (30 s): only the drain can end the detached turn within the test.
    t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await t.close();
    await fake.close();
  });

  test('DESIGN §12: SIGTERM drain covers detached turns — past the drain deadline a turn with no client is stopped (SHUTTING_DOWN), stored interrupted, its provider call closed', async () => {
    const u = await userWithOpenAiKey(t, fake.validKey, 'drain');
    fake.enqueueStream({ chunks: Array.from({ length: 100 }, (_, i) => `d${i} `), delayMs: 100 });
    const seen = fake.streams.length;
    const post = openStream(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`, await t.token(u), message());
    await post.deltas(2);
    post.destroy();
    await delay(100);
    const upstream = fake.streams[seen];
    assert.equal(upstream?.closedByClient, false, 'detached, still running');
    const drainMs = 300;
    const started = Date.now();
    await t.deps.lifecycle.drain(drainMs);
    assert.ok(Date.now() - started < drainMs + 2000, `the drain took ${Date.now() - started} ms`);
    assert.ok(((await upstream?.closed) ?? 0) > 0);
    assert.equal(upstream?.closedByClient, true);
    const row = await replyRow(t, String(post.frames[0]?.data['assistantMessageId']));
    assert.deepEqual([row?.status, row?.error_code], ['interrupted', 'SHUTTING_DOWN']);
  });
});

/** The app's own leases with some of their calls replaced (`own` gets the real leases too). */
function leasesWith(own: (real: StreamLeases) => Partial<StreamLeases>): (real: StreamLeases) => StreamLeases {
  return (real) => ({
    acquire: (u, ttl) => real.acquire(u, ttl),
    renew: (u, token, ttl) => real.renew(u, token, ttl),
    release: (u, token) => real.release(u, token),
    close: () => real.close(),
    ...own(real),
  });
}

/** A user's turn that streams for half a minute (600 deltas 50 ms apart), once its first delta is in. */
async function longLiveTurn(t: TestApp, fake: OpenAiCompatibleFake, name: string): Promise<{ user: string; live: LiveStream }> {
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const user = await userWithOpenAiKey(t, fake.validKey, name);
  fake.enqueueStream({ chunks: Array.from({ length: 600 }, (_, i) => `w${i} `), delayMs: 50 });
  const live = openStream(base, await t.token(user), message());
  assert.equal(await live.status, 200);
  await live.deltas(1);
  return { user, live };
}

describe('the stream lease at the end of a turn (DESIGN §4)', () => {
  test('DESIGN §4: a start whose lease came back only after the user’s live turn ended → 200, its reply stamped when it was admitted, never before that turn ended', async () => {
    const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    // The next acquire waits for the test: its answer comes in late, as from a stalled lease store.
    let hold: { asked: () => void; answer: Promise<void> } | undefined;
    const asked = gate();
    const answer = gate();
    const t = await buildTestApp({
      env: { OPENAI_BASE_URL: fake.url },
      deps: {
        leases: leasesWith((real) => ({
          async acquire(u, ttl) {
            const h = hold;
            hold = undefined;
            if (h !== undefined) {
              h.asked();
              await h.answer;
            }
            return real.acquire(u, ttl);
          },
        })),
      },
    });
    try {
      const { user: u, live } = await longLiveTurn(t, fake, 'admitted-at');
      const liveReply = String(live.frames[0]?.data['assistantMessageId']);
      // The next start arrives while the turn is live; its lease is asked for and not yet answered.
      hold = { asked: asked.open, answer: answer.opened };
      const next = send(t, u, null, message());
      await asked.opened;
      await delay(20);
      const stop = await t.call('POST', `/api/advisor/conversations/${String(live.frames[0]?.data['conversationId'])}/stop`, { user: u });
      assert.equal(stop.statusCode, 202);
      // Stored, lease given back, terminal frame sent: then the store answers the next start.
      await live.ended;
      fake.enqueueStream({ chunks: ['next'] });
      answer.open();
      const res = await next;
      assert.deepEqual([res.statusCode, res.code], [200, undefined]);
      const ended = await replyRow(t, liveReply);
      const started = await replyRow(t, String(startOf(res)['assistantMessageId']));
      assert.equal(ended?.status, 'interrupted');
      assert.ok(ended.completed_at && started, 'both replies stored');
      assert.ok(
        started.created_at.getTime() >= ended.completed_at.getTime(),
        `the next reply is stamped ${started.created_at.toISOString()}, the live one ended ${ended.completed_at.toISOString()}`,
      );
    } finally {
      answer.open();
      await t.close();
      await fake.close();
    }
  });

  test('DESIGN §4: a lease renewal still out when the turn ends does not keep the lease — the user’s next turn → 200, not 409 STREAM_IN_PROGRESS', async () => {
    const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    let held: { started: () => void; release: Promise<void>; done?: Promise<boolean> } | undefined;
    let releaseRenewal: () => void = () => undefined;
    const renewalStarted = new Promise<void>((started) => {
      held = { started, release: new Promise<void>((r) => (releaseRenewal = r)) };
    });
    const t = await buildTestApp({
      env: { OPENAI_BASE_URL: fake.url },
      deps: {
        // The first renewal waits for the test: it is still out while the turn ends.
        leases: leasesWith((real) => ({
          renew(u, token, ttl) {
            const h = held;
            if (h === undefined) return real.renew(u, token, ttl);
            held = undefined;
            h.started();
            h.done = h.release.then(() => real.renew(u, token, ttl));
            renewalDone = h.done;
            return h.done;
          },
        })),
      },
    });
    let renewalDone: Promise<boolean> | undefined;
    try {
      // Long enough for the renewal ticker (one renewal per lease within 20 s) to reach this turn.
      const { user: u, live: post } = await longLiveTurn(t, fake, 'lease-end');
      await renewalStarted;
      const conversationId = String(post.frames[0]?.data['conversationId']);
      const stop = await t.call('POST', `/api/advisor/conversations/${conversationId}/stop`, { user: u });
      assert.equal(stop.statusCode, 202);
      // The turn has stored its reply by now and would have given its lease back.
      await waitFor('the reply stored interrupted', async () =>
        (await replyRow(t, String(post.frames[0]?.data['assistantMessageId'])))?.status === 'interrupted' ? true : undefined,
      );
      await delay(100);
      releaseRenewal();
      await renewalDone;
      await post.ended;
      fake.enqueueStream({ chunks: ['next'] });
      const next = await send(t, u, conversationId, message());
      assert.deepEqual([next.statusCode, next.code], [200, undefined]);
    } finally {
      releaseRenewal();
      await t.close();
      await fake.close();
    }
  });
});
