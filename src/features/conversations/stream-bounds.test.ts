// DESIGN §10: bounded by design — a stream client that stops reading is cut off after
// STREAM_STALL_TIMEOUT_MS (its turn stops as if it had gone, its lease freed), and a turn that runs past
// STREAM_MAX_DURATION_MS ends with UPSTREAM_TIMEOUT, stored and settled by the usual rule.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { startOpenAiCompatibleFake, type OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { turnStatus } from '../../../test/kits/billing.ts';
import { gate } from '../../../test/helpers/events.ts';
import { message, replyRow, send, startOf, userWithOpenAiKey, waitFor } from '../../../test/kits/conversations.ts';

const STALL_MS = 300;
const MAX_DURATION_MS = 1500;

describe('advisor stream: bounds (DESIGN §10)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  /** A second instance on t's database whose turns are cut at MAX_DURATION_MS (t's run for the default 15 min). */
  let capped: TestApp;
  let port: number;
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    t = await buildTestApp({
      // No detach grace: a client cut off is the turn's last, so the turn stops at once (DESIGN §12).
      env: { OPENAI_BASE_URL: fake.url, STREAM_STALL_TIMEOUT_MS: String(STALL_MS), STREAM_DETACH_GRACE_MS: '0' },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
    capped = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url, STREAM_MAX_DURATION_MS: String(MAX_DURATION_MS) }, shareWith: t });
  });
  after(async () => {
    await capped.close();
    await t.close();
    await fake.close();
  });

  test('DESIGN §10: a stream client that reads nothing for STREAM_STALL_TIMEOUT_MS while frames wait is cut off; with STREAM_DETACH_GRACE_MS=0 the turn stops, its reply is stored interrupted, its lease freed', async () => {
    const user = await userWithOpenAiKey(t, fake.validKey, 'stall');
    // ~32 MB of deltas: far more than the socket buffers hold for a client that never reads. The provider
    // holds the last tenth back until the reply is stored, so the turn (which no longer waits for its
    // clients, DESIGN §12) is still streaming when the client is cut off, however slow the machine.
    const piece = 'x'.repeat(32 * 1024);
    const pieces = 1000;
    const stored = gate();
    fake.enqueueStream({ chunks: Array.from({ length: pieces }, () => piece), delayMs: 2, hold: { afterChunks: 900, until: stored.opened } });
    const body = JSON.stringify(message());
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.pause();
    socket.write(
      `POST /api/advisor/conversations/new/messages/stream HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${await t.token(user)}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    const reply = await waitFor('the reply row', async () => {
      const r = await t.deps.db.selectFrom('messages').select(['id', 'status']).where('user_id', '=', user).where('role', '=', 'assistant').executeTakeFirst();
      return r;
    });
    const row = await waitFor('the reply to end', async () => {
      const r = await replyRow(t, reply.id);
      return r?.status === 'streaming' ? undefined : r;
    });
    stored.open();
    assert.deepEqual([row.status, row.finish_reason], ['interrupted', 'aborted']);
    assert.ok(row.content.length > 0 && row.content.length < pieces * piece.length, 'what was produced before the cut is stored');
    assert.equal(await turnStatus(t, reply.id), 'charged', 'deltas were produced: charged by the usual rule');
    socket.resume();
    await closed;
    fake.enqueueStream({ chunks: ['next'] });
    assert.equal((await send(t, user, null, message())).statusCode, 200, 'the lease was freed');
  });

  test('DESIGN §10: a turn running past STREAM_MAX_DURATION_MS ends with error UPSTREAM_TIMEOUT; the reply is stored failed with what was sent, and charged', async () => {
    const user = await userWithOpenAiKey(capped, fake.validKey, 'long');
    // 30 s of deltas, 100 ms apart (far inside the idle timeout): only the duration cap ends it sooner.
    const natural = 300 * 100;
    fake.enqueueStream({ chunks: Array.from({ length: 300 }, (_, i) => `w${i} `), delayMs: 100 });
    const began = Date.now();
    const res = await send(capped, user, null, message());
    const took = Date.now() - began;
    const last = res.frames.at(-1);
    assert.deepEqual([last?.event, last?.data['code'], last?.data['retryable']], ['error', 'UPSTREAM_TIMEOUT', true], res.body);
    assert.ok(took >= MAX_DURATION_MS - 50 && took < natural, `ended after ${took} ms`);
    const turnId = String(startOf(res)['assistantMessageId']);
    const stored = await replyRow(capped, turnId);
    const sent = res.frames
      .filter((f) => f.event === 'delta')
      .map((f) => String(f.data['text']))
      .join('');
    assert.ok(sent.length > 0);
    assert.deepEqual([stored?.status, stored?.error_code, stored?.content], ['failed', 'UPSTREAM_TIMEOUT', sent]);
    assert.equal(await turnStatus(capped, turnId), 'charged');
  });
});
