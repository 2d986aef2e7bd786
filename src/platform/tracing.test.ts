// DESIGN §16: a turn's trace — the request's span and, as its children, the stages §16 names.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { buildTestApp, type TestApp } from '../../test/helpers/app.ts';
import { startOpenAiCompatibleFake, type OpenAiCompatibleFake } from '../../test/fakes/index.ts';
import { message, send, userWithOpenAiKey, waitFor } from '../../test/kits/conversations.ts';

let t: TestApp;
let fake: OpenAiCompatibleFake;
const spans = new InMemorySpanExporter();

before(async () => {
  fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url }, spanExporter: spans });
});
after(async () => {
  await t.close();
  await fake.close();
});

const STREAM_ROUTE = 'POST /api/advisor/conversations/new/messages/stream';

test('DESIGN §16: a turn with a tool round → a request span whose children are admission, start statement, provider call ×2, first delta, tool call, settlement; its metrics observed', async () => {
  const user = await userWithOpenAiKey(t, fake.validKey, 'traced');
  spans.reset();
  fake.enqueueStream({ toolCalls: [{ name: 'list_my_accounts' }] });
  fake.enqueueStream({ chunks: ['You have', ' none'] });
  const res = await send(t, user, null, message());
  assert.equal(res.statusCode, 200);
  assert.equal(res.frames.at(-1)?.event, 'done', res.body);
  const request = await waitFor('the request span', () => spans.getFinishedSpans().find((s) => s.name === STREAM_ROUTE));
  const children = (): ReadableSpan[] => spans.getFinishedSpans().filter((s) => s.parentSpanContext?.spanId === request.spanContext().spanId);
  await waitFor('the settlement span', () => (children().some((s) => s.name === 'advisor.settle') ? true : undefined));
  assert.deepEqual(
    children()
      .map((s) => s.name)
      .sort(),
    [
      'advisor.admission',
      'advisor.first_delta',
      'advisor.provider_call',
      'advisor.provider_call',
      'advisor.settle',
      'advisor.start_statement',
      'advisor.tool_call',
    ],
  );
  assert.ok(children().every((s) => s.spanContext().traceId === request.spanContext().traceId));
  assert.equal(request.attributes['http.response.status_code'], 200);
  assert.equal(children().find((s) => s.name === 'advisor.tool_call')?.attributes['advisor.tool'], 'list_my_accounts');
  const first = children().find((s) => s.name === 'advisor.first_delta');
  assert.equal(first?.attributes['advisor.provider'], 'openai');
  // The time to first delta, as a metric too.
  const ttfd = await t.deps.metrics.timeToFirstDelta.get();
  assert.equal(ttfd.values.find((v) => v.metricName === 'advisor_time_to_first_delta_seconds_count' && v.labels['provider'] === 'openai')?.value, 1);
  // The stores' latencies beside it: the turn's frame-log writes, and (on PostgreSQL) its pool checkouts.
  const count = async (h: typeof t.deps.metrics.frameLogWrite): Promise<number> =>
    (await h.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  // The log's terminal write is timed when the store answers it, which may be after the client had `done`.
  await waitFor('a frame-log write timed', async () => ((await count(t.deps.metrics.frameLogWrite)) > 0 ? true : undefined));
  if (t.deps.dbKind === 'postgres') assert.ok((await count(t.deps.metrics.dbPoolWait)) > 0);
});

test('DESIGN §16: a provider failure → advisor_provider_errors_total by code, and the request span says it', async () => {
  const user = await userWithOpenAiKey(t, fake.validKey, 'traced-failure');
  spans.reset();
  fake.enqueueStream({ status: 429 });
  const res = await send(t, user, null, message());
  assert.equal(res.statusCode, 200);
  const code = String(res.frames.at(-1)?.data['code']);
  assert.equal(res.frames.at(-1)?.event, 'error');
  const request = await waitFor('the request span', () => spans.getFinishedSpans().find((s) => s.name === STREAM_ROUTE));
  assert.equal(request.attributes['advisor.error_code'], code);
  const errors = await t.deps.metrics.providerErrors.get();
  assert.equal(errors.values.find((v) => v.labels['code'] === code)?.value, 1);
});

test('DESIGN §16: with OTEL_EXPORTER_OTLP_ENDPOINT the spans go to <endpoint>/v1/traces over OTLP/HTTP (sent at the latest as the app closes)', async () => {
  const received: { url: string | undefined; body: string }[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ url: req.url, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  const { port } = receiver.address() as AddressInfo;
  try {
    const app = await buildTestApp({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}/` } });
    assert.equal((await app.call('GET', '/healthz')).statusCode, 200);
    await app.close();
    assert.equal(received.length, 1);
    assert.equal(received[0]?.url, '/v1/traces');
    assert.match(received[0]?.body ?? '', /"name":"GET \/healthz"/);
    assert.match(received[0]?.body ?? '', /advisor-service/);
  } finally {
    receiver.close();
  }
});
