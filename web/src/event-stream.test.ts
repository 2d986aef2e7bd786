import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FIRST_DELAY_MS, MAX_FRUITLESS_ATTEMPTS, followStream, readFrames } from './event-stream.ts';
import type { Frame } from './reply.ts';

const wire = (id: number, event: string, data: unknown) => `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const start = (id = 1) => wire(id, 'start', { conversationId: 'c1', assistantMessageId: 'a1' });
const delta = (id: number, text: string) => wire(id, 'delta', { text });
const done = (id: number) => wire(id, 'done', { finishReason: 'stop' });

/** A response body of these chunks; then it ends, breaks like a lost connection, or stays open. */
function body(chunks: readonly (string | Uint8Array<ArrayBuffer>)[], then: 'end' | 'break' | 'hang' = 'end'): ReadableStream<Uint8Array<ArrayBuffer>> {
  const bytes = chunks.map((c) => (typeof c === 'string' ? new TextEncoder().encode(c) : c));
  let i = 0;
  // One chunk per read (an error discards what is queued: the chunks before a break are read first).
  return new ReadableStream<Uint8Array<ArrayBuffer>>(
    {
      pull(controller) {
        const b = bytes[i++];
        if (b) controller.enqueue(b);
        else if (then === 'end') controller.close();
        else if (then === 'break') controller.error(new TypeError('network error'));
      },
    },
    { highWaterMark: 0 },
  );
}

const sse = (b: ReadableStream<Uint8Array<ArrayBuffer>>) => new Response(b, { status: 200, headers: { 'content-type': 'text/event-stream' } });
const status = (code: number, headers: Record<string, string> = {}) => new Response(code === 204 ? null : '{}', { status: code, headers });

/** A follow driven by a script of answers, one per attempt; records the headers of each attempt and every wait. */
async function follow(answers: readonly (() => Response)[], opts: { lastEventId?: number; abortOnWait?: number } = {}) {
  const controller = new AbortController();
  const sent: Record<string, string>[] = [];
  const waits: number[] = [];
  const frames: Frame[] = [];
  const end = await followStream({
    open: async (headers) => {
      sent.push({ ...headers });
      const next = answers[sent.length - 1];
      if (!next) throw new Error(`attempt ${sent.length} was not expected`);
      return next();
    },
    lastEventId: opts.lastEventId ?? 0,
    onFrame: (f) => frames.push(f),
    signal: controller.signal,
    wait: async (ms) => {
      waits.push(ms);
      if (waits.length === opts.abortOnWait) controller.abort();
    },
  });
  return { end, sent, waits, ids: frames.map((f) => f.id), frames };
}

const networkError = () => {
  throw new TypeError('Failed to fetch');
};

describe('readFrames (DESIGN §7, §12: the reply read as it comes)', () => {
  it('DESIGN §7: a stream split at every byte (inside a frame, a blank line, a multi-byte character) gives the frames of the stream read whole; pings and unknown events are skipped', async () => {
    const text = start() + ': ping\n\n' + delta(2, 'Risk 1 € — ') + wire(3, 'unknown', {}) + delta(4, 'stop 😀') + done(5);
    const whole: Frame[] = [];
    assert.deepEqual(await readFrames(body([text]), (f) => whole.push(f)), { terminal: true, retryMs: undefined });
    const bytes = new TextEncoder().encode(text);
    const split: Frame[] = [];
    await readFrames(body([...bytes].map((b) => Uint8Array.of(b))), (f) => split.push(f));
    assert.deepEqual(split, whole);
    assert.deepEqual(
      whole.map((f) => [f.id, f.event]),
      [
        [1, 'start'],
        [2, 'delta'],
        [4, 'delta'],
        [5, 'done'],
      ],
    );
    assert.deepEqual(whole[1]?.data, { text: 'Risk 1 € — ' });
    assert.deepEqual(whole[2]?.data, { text: 'stop 😀' });
  });

  it('DESIGN §12: the terminal frame resolves at once, the connection left open or not; a cut before it resolves not terminal, without the half-received frame', async () => {
    const got: Frame[] = [];
    assert.deepEqual(await readFrames(body([start(), done(2)], 'hang'), (f) => got.push(f)), { terminal: true, retryMs: undefined });
    assert.equal(got.length, 2);
    const cut: Frame[] = [];
    assert.deepEqual(await readFrames(body([start(), delta(2, 'a'), 'id: 3\nevent: delta\ndata: {"te'], 'break'), (f) => cut.push(f)), {
      terminal: false,
      retryMs: undefined,
    });
    assert.deepEqual(
      cut.map((f) => f.id),
      [1, 2],
    );
    const ended: Frame[] = [];
    assert.deepEqual(await readFrames(body([start(), delta(2, 'a'), 'retry: 2500\n\n']), (f) => ended.push(f)), { terminal: false, retryMs: 2500 });
  });
});

describe('followStream (DESIGN §12: resume; issue 41 item 8: the token never in a URL)', () => {
  it('DESIGN §12: a cut mid-reply reconnects with Last-Event-ID of the last frame taken in; every frame once, in order; the terminal frame ends it', async () => {
    const r = await follow([() => sse(body([start(), delta(2, 'a'), delta(3, 'b')], 'break')), () => sse(body([delta(4, 'c'), done(5)]))]);
    assert.equal(r.end, 'ended');
    assert.deepEqual(r.sent, [{}, { 'last-event-id': '3' }]);
    assert.deepEqual(r.ids, [1, 2, 3, 4, 5]);
    assert.deepEqual(r.waits, [FIRST_DELAY_MS]);
  });

  it('DESIGN §12: a resume starts after the id the page has; a body that ends without the terminal frame is resumed like a cut', async () => {
    const r = await follow([() => sse(body([delta(8, 'x')])), () => sse(body([done(9)]))], { lastEventId: 7 });
    assert.equal(r.end, 'ended');
    assert.deepEqual(r.sent, [{ 'last-event-id': '7' }, { 'last-event-id': '8' }]);
    assert.deepEqual(r.ids, [8, 9]);
  });

  it('DESIGN §12: 204 (no turn, or the terminal frame already had) ends it without another attempt', async () => {
    const r = await follow([() => status(204)], { lastEventId: 5 });
    assert.deepEqual([r.end, r.sent.length, r.waits], ['ended', 1, []]);
  });

  it('DESIGN §3, §12: 503 SERVICE_UNAVAILABLE is retried after its Retry-After; 404 and 401 are refusals, never retried', async () => {
    const r = await follow([() => status(503, { 'retry-after': '2' }), () => sse(body([start(), done(2)]))]);
    assert.deepEqual([r.end, r.waits, r.ids], ['ended', [2000], [1, 2]]);
    for (const code of [404, 401, 400]) {
      const refused = await follow([() => status(code)]);
      assert.deepEqual([refused.end, refused.sent.length, refused.waits], ['refused', 1, []], `HTTP ${code}`);
    }
    const tooLong = await follow([() => status(503, { 'retry-after': '120' })]);
    assert.deepEqual([tooLong.end, tooLong.sent.length], ['refused', 1]);
  });

  it(`DESIGN §12: a lost network is retried with a growing delay; ${MAX_FRUITLESS_ATTEMPTS} attempts in a row that bring no frame give up (refused); a frame resets the count`, async () => {
    const r = await follow(Array.from({ length: MAX_FRUITLESS_ATTEMPTS }, () => networkError));
    assert.equal(r.end, 'refused');
    assert.equal(r.sent.length, MAX_FRUITLESS_ATTEMPTS);
    assert.deepEqual(r.waits, [1000, 2000, 4000, 8000, 8000, 8000, 8000]);
    const recovered = await follow([networkError, networkError, () => sse(body([start()], 'break')), networkError, () => sse(body([done(2)]))]);
    assert.equal(recovered.end, 'ended');
    assert.deepEqual(recovered.waits, [1000, 2000, 1000, 1000]);
    assert.deepEqual(recovered.sent.at(-1), { 'last-event-id': '1' });
  });

  it('DESIGN §12: the server’s retry: field sets the reconnect delay', async () => {
    const r = await follow([() => sse(body(['retry: 250\n\n', start()])), () => sse(body([done(2)]))]);
    assert.deepEqual([r.end, r.waits], ['ended', [250]]);
  });

  it('issue 41 item 8: letting go (the signal) ends it as detached, with no further attempt', async () => {
    const r = await follow([networkError, networkError], { abortOnWait: 1 });
    assert.deepEqual([r.end, r.sent.length], ['detached', 1]);
  });
});
