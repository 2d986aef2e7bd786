// Secrets never reach a log line: every field named like one is censored, down to three levels, in the
// line's fields, in an error's and in a child logger's bindings, without touching what was logged.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger } from './logger.ts';

function capture(): { lines: () => Record<string, unknown>[]; sink: Writable } {
  const out: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      out.push(chunk.toString('utf8'));
      done();
    },
  });
  return {
    sink,
    lines: () =>
      out
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const SECRET = 'sk-live-0123456789abcdef';

test('DESIGN §10: a secret-named field is censored at any of three levels, in arrays and errors too, and the object logged is left as it was', () => {
  const { sink, lines } = capture();
  const log = createLogger('info', sink);
  const err = Object.assign(new Error('provider refused'), { code: 'PROVIDER_AUTH', config: { apiKey: SECRET } });
  const line = {
    authorization: `Bearer ${SECRET}`,
    headers: { authorization: SECRET, 'stripe-signature': SECRET, accept: 'text/event-stream' },
    req: { headers: { authorization: SECRET }, method: 'POST' },
    body: { image: { dataBase64: SECRET }, keys: [{ key: SECRET, provider: 'openai' }] },
    token: SECRET,
    secret: SECRET,
    err,
    route: '/api/advisor/provider-keys',
  };
  const before = structuredClone({ ...line, err: undefined });
  log.info(line, 'request');
  const [written] = lines();
  const text = JSON.stringify(written);
  assert.ok(!text.includes(SECRET), `no secret in ${text}`);
  assert.equal(written?.['authorization'], '[redacted]');
  assert.deepEqual(written?.['headers'], { authorization: '[redacted]', 'stripe-signature': '[redacted]', accept: 'text/event-stream' });
  assert.deepEqual(written?.['req'], { headers: { authorization: '[redacted]' }, method: 'POST' });
  assert.deepEqual(written?.['body'], { image: { dataBase64: '[redacted]' }, keys: [{ key: '[redacted]', provider: 'openai' }] });
  assert.equal(written?.['route'], '/api/advisor/provider-keys', 'other fields as they were');
  const writtenErr = written?.['err'] as Record<string, unknown>;
  assert.equal(writtenErr['type'], 'Error', 'the error keeps its kind…');
  assert.equal(writtenErr['message'], 'provider refused', '…its message…');
  assert.equal(writtenErr['code'], 'PROVIDER_AUTH', '…and its own fields');
  assert.match(String(writtenErr['stack']), /provider refused/);
  assert.deepEqual(writtenErr['config'], { apiKey: '[redacted]' });
  assert.deepEqual({ ...line, err: undefined }, before, 'the object logged is unchanged');
  assert.equal(err.config.apiKey, SECRET, 'and so is the error');
});

test('DESIGN §10: a child logger’s bindings are censored at their top level; a line with nothing to censor is written as given', () => {
  const { sink, lines } = capture();
  const log = createLogger('info', sink).child({ reqId: 'req_1', token: SECRET });
  log.info({ conversationId: 'c1', deltas: 200, nested: { a: { b: { key: 'deeper than three levels stays' } } } }, 'advisor stream ended');
  const [written] = lines();
  assert.equal(written?.['token'], '[redacted]');
  assert.equal(written?.['reqId'], 'req_1');
  assert.equal(written?.['deltas'], 200);
  assert.deepEqual(written?.['nested'], { a: { b: { key: 'deeper than three levels stays' } } }, 'three levels are looked at, as the paths were');
  const cycle: unknown[] = [{ token: SECRET }];
  cycle.push(cycle);
  const object: Record<string, unknown> = { secret: SECRET };
  object['self'] = object;
  log.info({ cycle, object }, 'cycles');
  const text = JSON.stringify(lines()[1]);
  assert.ok(!text.includes(SECRET) && text.includes('[redacted]'), `cycles end, censored: ${text}`);
});
