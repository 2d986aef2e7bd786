import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { ProviderError, type ChatEvent, type UpstreamAgent } from './index.ts';
import { createUpstreamAgent, streamSse, type Translator } from './upstream.ts';
import { gate, settles } from '../../../test/helpers/events.ts';

/** Every `data:` is a delta; `[DONE]` ends the answer. */
class Echo implements Translator {
  ended = false;

  event(_name: string, data: string, out: ChatEvent[]): void {
    if (data === '[DONE]') {
      this.ended = true;
      out.push({ type: 'finish', reason: 'stop' });
    } else {
      out.push({ type: 'delta', text: data });
    }
  }

  end(out: ChatEvent[]): void {
    out.push({ type: 'finish', reason: 'stop' });
  }
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

describe('upstream SSE call (undici)', () => {
  let server: Server;
  let agent: UpstreamAgent;
  let base: string;
  let handler: Handler = (_req, res) => res.end();
  let closedAt: Promise<number> = Promise.resolve(0);

  before(async () => {
    server = createServer((req, res) => {
      closedAt = new Promise((resolve) => res.once('close', () => resolve(Date.now())));
      req.resume();
      req.once('end', () => handler(req, res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    agent = createUpstreamAgent();
  });
  after(async () => {
    await agent.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const call = { provider: 'test', url: '', headers: { 'content-type': 'application/json' } };
  const open = (signal = new AbortController().signal, idleTimeoutMs = 5000): AsyncIterableIterator<ChatEvent[]> =>
    streamSse({ ...call, url: `${base}/chat` }, '{"q":"é"}', { agent, baseUrl: base, apiKey: 'k', idleTimeoutMs }, signal, new Echo());

  async function collect(stream: AsyncIterableIterator<ChatEvent[]>): Promise<ChatEvent[][]> {
    const batches: ChatEvent[][] = [];
    for await (const b of stream) batches.push(b);
    return batches;
  }

  /** Sends `parts` as separate writes, a tick apart so each is its own read on the other side. */
  function sendParts(parts: Buffer[]): Handler {
    return (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      void (async () => {
        for (const p of parts) {
          res.write(p);
          await delay(5);
        }
        res.end();
      })();
    };
  }

  test('a character split across reads and a leading byte order mark split across reads decode as sent', async () => {
    const bytes = Buffer.from('\uFEFFdata: h€llo 😀\n\ndata: [DONE]\n\n');
    // Cut inside the BOM (3 bytes), inside € (3 bytes) and inside the emoji (4 bytes).
    const euro = bytes.indexOf(Buffer.from('€'));
    const emoji = bytes.indexOf(Buffer.from('😀'));
    handler = sendParts([bytes.subarray(0, 1), bytes.subarray(1, euro + 1), bytes.subarray(euro + 1, emoji + 2), bytes.subarray(emoji + 2)]);
    const batches = await collect(open());
    assert.deepEqual(batches.flat(), [
      { type: 'delta', text: 'h€llo 😀' },
      { type: 'finish', reason: 'stop' },
    ]);
  });

  test('the events of one read come as one batch, in order', async () => {
    // The second part is sent only once the first batch is taken: a busy machine cannot join the two reads.
    const taken = gate();
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: a\n\ndata: b\n\ndata: c\n\n');
      void taken.opened.then(() => res.end('data: [DONE]\n\n'));
    };
    const batches: ChatEvent[][] = [];
    for await (const b of open()) {
      batches.push(b);
      taken.open();
    }
    assert.deepEqual(batches, [
      [
        { type: 'delta', text: 'a' },
        { type: 'delta', text: 'b' },
        { type: 'delta', text: 'c' },
      ],
      [{ type: 'finish', reason: 'stop' }],
    ]);
  });

  test('the request goes out as a POST with the caller headers and the body', async () => {
    let seen: { method: string | undefined; type: string | undefined; length: string | undefined } | undefined;
    handler = (req, res) => {
      seen = { method: req.method, type: req.headers['content-type'], length: req.headers['content-length'] };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: [DONE]\n\n');
    };
    await collect(open());
    assert.deepEqual(seen, { method: 'POST', type: 'application/json', length: String(Buffer.byteLength('{"q":"é"}')) });
  });

  test('a redirect is not followed (it would carry the key header elsewhere): 307 → PROVIDER_ERROR, one request', async () => {
    const seen: string[] = [];
    handler = (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url === '/chat') {
        res.writeHead(307, { location: '/moved' });
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: a\n\ndata: [DONE]\n\n');
    };
    await assert.rejects(collect(open()), (err: unknown) => {
      assert.ok(err instanceof ProviderError);
      assert.equal(err.code, 'PROVIDER_ERROR');
      return true;
    });
    assert.deepEqual(seen, ['POST /chat']);
  });

  test('an error status is read and mapped; the provider text is not kept', async () => {
    handler = (_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":{"type":"invalid_api_key","message":"Incorrect API key sk-abc"}}');
    };
    await assert.rejects(collect(open()), (err: unknown) => {
      assert.ok(err instanceof ProviderError);
      assert.deepEqual([err.code, err.retryable, err.status, err.detail], ['PROVIDER_AUTH_FAILED', false, 401, 'test answered 401 (invalid_api_key)']);
      return true;
    });
  });

  test('no byte before the idle timeout → UPSTREAM_TIMEOUT, and the socket is closed', async () => {
    handler = () => undefined;
    const started = Date.now();
    await assert.rejects(collect(open(undefined, 100)), (err: unknown) => err instanceof ProviderError && err.code === 'UPSTREAM_TIMEOUT');
    assert.ok(Date.now() - started >= 90);
    await settles(closedAt, 'the socket closing');
  });

  test('a consumer holding a batch longer than the idle timeout is not timed out', async () => {
    handler = sendParts([Buffer.from('data: a\n\n'), Buffer.from('data: [DONE]\n\n')]);
    // The provider's own gaps (its first byte included) must stay far below the idle timeout on a busy
    // machine; only the consumer's hold outlasts it.
    const idleMs = 2000;
    const seen: ChatEvent[] = [];
    for await (const batch of open(undefined, idleMs)) {
      seen.push(...batch);
      await delay(idleMs + 500);
    }
    assert.deepEqual(
      seen.map((e) => e.type),
      ['delta', 'finish'],
    );
  });

  test("the caller's signal closes the upstream socket at once and rethrows its reason", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: a\n\n');
    };
    const ac = new AbortController();
    const reason = new Error('client went away');
    const stream = open(ac.signal);
    assert.deepEqual((await stream.next()).value, [{ type: 'delta', text: 'a' }]);
    const pending = stream.next();
    ac.abort(reason);
    await assert.rejects(pending, (err: unknown) => err === reason);
    await settles(closedAt, 'the socket closing');
  });
});
