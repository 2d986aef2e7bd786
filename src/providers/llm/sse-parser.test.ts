import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SseLineTooLongError, SseParser } from './sse-parser.ts';

function parse(chunks: string[], end = true): [string, string][] {
  const events: [string, string][] = [];
  const parser = new SseParser((event, data) => events.push([event, data]));
  for (const c of chunks) parser.push(c);
  if (end) parser.end();
  return events;
}

/** Every way of cutting `text` in two, so a line end or field split across chunks is covered. */
function allSplits(text: string): string[][] {
  return Array.from({ length: text.length + 1 }, (_, i) => [text.slice(0, i), text.slice(i)]);
}

describe('SSE parser (WHATWG event-stream rules)', () => {
  const stream = 'event: message_start\ndata: {"a":1}\n\n: OPENROUTER PROCESSING\n\ndata: line one\ndata: line two\n\ndata:no-space\nid: 7\nretry: 10\n\n';
  const expected: [string, string][] = [
    ['message_start', '{"a":1}'],
    ['message', 'line one\nline two'],
    ['message', 'no-space'],
  ];

  for (const [name, eol] of [
    ['LF', '\n'],
    ['CRLF', '\r\n'],
    ['CR', '\r'],
  ] as const) {
    test(`${name} line ends, split at every position, give the same events`, () => {
      const text = stream.replaceAll('\n', eol);
      for (const chunks of allSplits(text)) assert.deepEqual(parse(chunks), expected, JSON.stringify(chunks));
    });
  }

  test('one character at a time, with empty chunks in between', () => {
    assert.deepEqual(parse([...stream.replaceAll('\n', '\r\n')].flatMap((c) => [c, ''])), expected);
  });

  test('comments and empty events dispatch nothing; the event name resets after each event', () => {
    assert.deepEqual(parse([': ping\n\n\n\nevent: x\n\ndata: y\n\n']), [['message', 'y']]);
  });

  test('a last event without its blank line is still delivered at the end of the body', () => {
    assert.deepEqual(parse(['data: [DONE]']), [['message', '[DONE]']]);
    assert.deepEqual(parse(['data: [DONE]'], false), []);
  });

  test('a line that never ends is refused instead of growing without bound', () => {
    const parser = new SseParser(() => undefined);
    assert.throws(() => {
      for (let i = 0; i < 10; i++) parser.push(`data: ${'x'.repeat(1024 * 1024)}`);
    }, SseLineTooLongError);
  });
});
