import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { SseWriter } from './sse.ts';

/** A raw HTTP/1.1 exchange: what each socket read brought, so the chunks on the wire can be checked. */
function fetchRaw(port: number, path: string, opts: { paused?: boolean } = {}): { reads: string[]; socket: net.Socket; ended: Promise<void> } {
  const reads: string[] = [];
  const socket = net.connect(port, '127.0.0.1', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => reads.push(d));
  if (opts.paused) socket.pause();
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { reads, socket, ended };
}

/** The body chunks of a chunked response (sizes and data), in order. */
function chunks(raw: string): string[] {
  let rest = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  const out: string[] = [];
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (size === 0) return out;
    out.push(rest.slice(eol + 2, eol + 2 + size));
    rest = rest.slice(eol + 2 + size + 2);
  }
}

describe('SseWriter', () => {
  let server: Server;
  let port = 0;
  let route: (res: ServerResponse) => void = (res) => res.end();

  before(async () => {
    server = createServer((_req, res) => route(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  test('the frames of one tick leave as one chunk; ids increase across ticks; comments carry none', async () => {
    route = (res) => {
      const sse = new SseWriter(res);
      sse.open({ 'x-request-id': 'r1' });
      sse.event('start', '{}');
      setTimeout(() => {
        sse.event('delta', '{"text":"a"}');
        sse.event('delta', '{"text":"b"}');
        sse.comment('ping');
        setTimeout(() => {
          sse.event('done', '{}');
          sse.end();
        }, 10);
      }, 10);
    };
    const raw = fetchRaw(port, '/');
    await raw.ended;
    const text = raw.reads.join('');
    assert.match(text, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(text, /\r\ncontent-type: text\/event-stream; charset=utf-8\r\n/);
    assert.match(text, /\r\nx-request-id: r1\r\n/);
    assert.match(text, /\r\nTransfer-Encoding: chunked\r\n/);
    assert.deepEqual(chunks(text), [
      'id: 1\nevent: start\ndata: {}\n\n',
      'id: 2\nevent: delta\ndata: {"text":"a"}\n\nid: 3\nevent: delta\ndata: {"text":"b"}\n\n: ping\n\n',
      'id: 4\nevent: done\ndata: {}\n\n',
    ]);
  });

  test('frames held back at end() go out with the end of the response, still chunked', async () => {
    route = (res) => {
      const sse = new SseWriter(res);
      sse.open({});
      sse.event('start', '{}');
      sse.event('done', '{}');
      sse.end();
      assert.equal(res.writableEnded, true);
      assert.equal(sse.event('late', '{}'), true, 'a write after the end is dropped');
    };
    const raw = fetchRaw(port, '/');
    await raw.ended;
    assert.deepEqual(chunks(raw.reads.join('')), ['id: 1\nevent: start\ndata: {}\n\nid: 2\nevent: done\ndata: {}\n\n']);
  });

  test('a client that does not read: writes report backpressure, drained() waits until it reads again', async () => {
    let report: (r: { frames: number; waitedForClient: boolean }) => void = () => undefined;
    const result = new Promise<{ frames: number; waitedForClient: boolean }>((resolve) => (report = resolve));
    const frame = JSON.stringify({ text: 'x'.repeat(1000) });
    route = (res) => {
      const sse = new SseWriter(res);
      sse.open({});
      const signal = new AbortController().signal;
      void (async () => {
        let frames = 0;
        let waitedForClient = false;
        // Until the kernel's buffers are full too, a drain comes at once; bounded so a broken writer fails instead of hanging.
        while (frames < 100_000) {
          frames++;
          if (sse.event('delta', frame)) continue;
          assert.equal(sse.needsDrain, true);
          const drained = sse.drained(signal).then(() => true);
          // Still waiting after 50 ms: the buffers are full. Only then does the client read again,
          // so however slow the machine, the client never reads before the writer waits for it.
          if (await Promise.race([drained, delay(50).then(() => false)])) continue;
          raw.socket.resume();
          await drained;
          waitedForClient = true;
          break;
        }
        raw.socket.resume();
        report({ frames, waitedForClient });
        sse.end();
      })();
    };
    const raw = fetchRaw(port, '/', { paused: true });
    const { frames, waitedForClient } = await result;
    await raw.ended;
    assert.ok(frames < 100_000, 'backpressure was reported');
    assert.ok(waitedForClient, 'drained() waited for the client to read');
    const sent = chunks(raw.reads.join('')).join('').split('\n\n').filter(Boolean);
    assert.equal(sent.length, frames, 'nothing lost');
    assert.deepEqual(
      sent.map((f) => Number(/^id: (\d+)/.exec(f)?.[1])),
      Array.from({ length: frames }, (_, i) => i + 1),
    );
  });
});
