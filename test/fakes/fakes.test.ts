// Proves each fake speaks its provider's wire format, so service tests can trust them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Stripe from 'stripe';
import type { OpenAiFlavor } from './index.ts';
import {
  makeStripeEvent,
  signStripePayload,
  startAnthropicFake,
  startFmpFake,
  startGeminiFake,
  startOpenAiCompatibleFake,
  startPolygonFake,
  startStripeFake,
} from './index.ts';
import { settles } from '../helpers/events.ts';

interface SseEvent {
  event?: string;
  data?: string;
  comments: string[];
}

function parseSse(text: string): SseEvent[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((b) => b.trim() !== '')
    .map((block) => {
      const ev: SseEvent = { comments: [] };
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(':')) ev.comments.push(line.slice(1).trim());
        else if (line.startsWith('event: ')) ev.event = line.slice(7);
        else if (line.startsWith('data: ')) ev.data = line.slice(6);
      }
      return ev;
    });
}

const json = (e: SseEvent | undefined): Record<string, unknown> => JSON.parse(e?.data ?? 'null') as Record<string, unknown>;
const post = (url: string, headers: Record<string, string>, body: unknown, signal?: AbortSignal): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
const chatBody = { model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] };

test('openai-compatible: key probe per flavour', async () => {
  const flavours: OpenAiFlavor[] = ['openai', 'mistral', 'xai', 'groq', 'deepseek'];
  for (const flavor of flavours) {
    const fake = await startOpenAiCompatibleFake({ flavor });
    try {
      const ok = await fetch(`${fake.url}/models`, { headers: { authorization: `Bearer ${fake.validKey}` } });
      assert.equal(ok.status, 200, flavor);
      const list = (await ok.json()) as { object: string; data: { id: string; object: string }[] };
      assert.equal(list.object, 'list');
      assert.ok(list.data.length > 0 && list.data.every((m) => m.object === 'model'));
      const bad = await fetch(`${fake.url}/models`, { headers: { authorization: 'Bearer sk-wrong-123456' } });
      const body = (await bad.json()) as Record<string, unknown>;
      if (flavor === 'xai') {
        assert.equal(bad.status, 400);
        assert.equal(body['code'], 'Client specified an invalid argument');
        assert.match(String(body['error']), /^Incorrect API key provided: sk\*\*\*56\./);
      } else {
        assert.equal(bad.status, 401, flavor);
      }
      if (flavor === 'openai') assert.deepEqual(Object.keys(body['error'] as object), ['message', 'type', 'param', 'code']);
    } finally {
      await fake.close();
    }
  }
});

test('openai-compatible: probe overrides and stall', async () => {
  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  const auth = { authorization: `Bearer ${fake.validKey}` };
  try {
    fake.setProbe('rate-limited');
    const limited = await fetch(`${fake.url}/models`, { headers: auth });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('retry-after'), '1');
    fake.setProbe('server-error');
    assert.equal((await fetch(`${fake.url}/models`, { headers: auth })).status, 503);
    fake.setProbe('stall');
    await assert.rejects(fetch(`${fake.url}/models`, { headers: auth, signal: AbortSignal.timeout(150) }));
    assert.equal(fake.requests.length, 3);
  } finally {
    await fake.close();
  }
});

test('openrouter: /key probe, public /models, processing comments', async () => {
  const fake = await startOpenAiCompatibleFake({ flavor: 'openrouter' });
  try {
    assert.equal((await fetch(`${fake.url}/models`)).status, 200);
    const info = await fetch(`${fake.url}/key`, { headers: { authorization: `Bearer ${fake.validKey}` } });
    const data = ((await info.json()) as { data: Record<string, unknown> }).data;
    assert.equal(data['is_free_tier'], false);
    const bad = await fetch(`${fake.url}/key`);
    assert.equal(bad.status, 401);
    assert.deepEqual(await bad.json(), { error: { message: 'No auth credentials found', code: 401 } });
    const res = await post(`${fake.url}/chat/completions`, { authorization: `Bearer ${fake.validKey}` }, chatBody);
    const events = parseSse(await res.text());
    assert.ok(events.some((e) => e.comments.includes('OPENROUTER PROCESSING')));
  } finally {
    await fake.close();
  }
});

test('openai stream: role, pieces, finish, usage chunk, [DONE]; request recorded', async () => {
  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  try {
    fake.scriptStream({ chunks: ['Hel', 'lo'], usage: { input: 7, output: 2 }, finishReason: 'length' });
    const res = await post(`${fake.url}/chat/completions`, { authorization: `Bearer ${fake.validKey}` }, chatBody);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = parseSse(await res.text());
    assert.equal(events.at(-1)?.data, '[DONE]');
    const chunks = events.slice(0, -1).map(json);
    type Choice = { delta: { role?: string; content?: string }; finish_reason: string | null };
    const choices = (c: Record<string, unknown>): Choice[] => c['choices'] as Choice[];
    assert.equal(choices(chunks[0] ?? {})[0]?.delta.role, 'assistant');
    assert.equal(chunks.map((c) => choices(c)[0]?.delta.content ?? '').join(''), 'Hello');
    assert.equal(choices(chunks.at(-2) ?? {})[0]?.finish_reason, 'length');
    assert.deepEqual(choices(chunks.at(-1) ?? {}), []);
    assert.deepEqual(chunks.at(-1)?.['usage'], {
      prompt_tokens: 7,
      completion_tokens: 2,
      total_tokens: 9,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    });
    const stream = fake.streams[0];
    assert.ok(stream);
    assert.deepEqual((stream.request.json as typeof chatBody).messages, chatBody.messages);
    assert.ok((await stream.closed) > 0);
    assert.equal(stream.closedByClient, false);
  } finally {
    await fake.close();
  }
});

test('openai stream: in-stream error, malformed line, drop, scripted status, one-shot queue', async () => {
  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  const url = `${fake.url}/chat/completions`;
  const auth = { authorization: `Bearer ${fake.validKey}` };
  try {
    fake.enqueueStream({ errorAfterChunks: 1 });
    fake.enqueueStream({ malformedAfterChunks: 1 });
    fake.enqueueStream({ dropAfterChunks: 1 });
    fake.enqueueStream({ status: 429 });
    const errored = parseSse(await (await post(url, auth, chatBody)).text());
    assert.equal((json(errored.at(-1))['error'] as { type: string }).type, 'server_error');
    const malformed = parseSse(await (await post(url, auth, chatBody)).text());
    assert.equal(malformed.at(-1)?.data, '{not json');
    const dropped = await post(url, auth, chatBody);
    assert.equal(dropped.status, 200);
    await assert.rejects(dropped.text());
    assert.equal((await post(url, auth, chatBody)).status, 429);
    const normal = parseSse(await (await post(url, auth, chatBody)).text());
    assert.equal(normal.at(-1)?.data, '[DONE]');
    const bad = await post(url, { authorization: 'Bearer nope' }, chatBody);
    assert.equal(bad.status, 401);
  } finally {
    await fake.close();
  }
});

test('mistral stream: usage rides on the finishing chunk', async () => {
  const fake = await startOpenAiCompatibleFake({ flavor: 'mistral' });
  try {
    const events = parseSse(await (await post(`${fake.url}/chat/completions`, { authorization: `Bearer ${fake.validKey}` }, chatBody)).text());
    const last = json(events.at(-2));
    assert.ok(last['usage']);
    assert.equal((last['choices'] as { finish_reason: string }[])[0]?.finish_reason, 'stop');
  } finally {
    await fake.close();
  }
});

test('client disconnect is observed', async () => {
  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  try {
    fake.scriptStream({ chunks: ['a', 'b', 'c'], stallAfterChunks: 1 });
    const ac = new AbortController();
    const res = await post(`${fake.url}/chat/completions`, { authorization: `Bearer ${fake.validKey}` }, chatBody, ac.signal);
    const reader = res.body?.getReader();
    assert.ok(reader);
    const first = await reader.read();
    assert.match(new TextDecoder().decode(first.value), /chat\.completion\.chunk/);
    ac.abort();
    const stream = fake.streams[0];
    assert.ok(stream);
    // The stream stalls after its first chunk: only the client's going closes it.
    await settles(stream.closed, 'the fake seeing the client go');
    assert.equal(stream.closedByClient, true);
  } finally {
    await fake.close();
  }
});

test('pacing, silence before headers, and close() with streams still open', async () => {
  const fake = await startAnthropicFake();
  const h = { 'x-api-key': fake.validKey, 'anthropic-version': '2023-06-01' };
  const msg = { model: 'claude-x', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] };
  try {
    fake.enqueueStream({ chunks: ['a', 'b', 'c'], delayMs: 60 });
    const started = Date.now();
    await (await post(`${fake.url}/messages`, h, msg)).text();
    assert.ok(Date.now() - started >= 170);
    fake.enqueueStream({ stallBeforeHeaders: true });
    await assert.rejects(post(`${fake.url}/messages`, h, msg, AbortSignal.timeout(150)));
    fake.enqueueStream({ dropAfterChunks: 1 });
    await assert.rejects(async () => (await post(`${fake.url}/messages`, h, msg)).text());
    assert.equal(fake.streams[2]?.closedByClient, false);
    fake.enqueueStream({ stallAfterChunks: 1 });
    const open = await post(`${fake.url}/messages`, h, msg);
    assert.equal(open.status, 200);
    // The open stream stalls forever: close() ends only if it does not wait for it.
    await settles(fake.close(), 'close() with a stream open');
    assert.equal(fake.streams[3]?.closedByClient, false);
    await assert.rejects(open.text());
  } finally {
    await fake.close();
  }
});

test('anthropic: headers, pagination, stream events, in-stream error', async () => {
  const fake = await startAnthropicFake({ pageSize: 2 });
  const h = { 'x-api-key': fake.validKey, 'anthropic-version': '2023-06-01' };
  try {
    const ids: string[] = [];
    let after: string | undefined;
    for (;;) {
      const q = after === undefined ? '' : `?after_id=${after}`;
      const page = (await (await fetch(`${fake.url}/models${q}`, { headers: h })).json()) as {
        data: { id: string; type: string }[];
        has_more: boolean;
        last_id: string;
      };
      assert.ok(page.data.length <= 2 && page.data.every((m) => m.type === 'model'));
      ids.push(...page.data.map((m) => m.id));
      if (!page.has_more) break;
      after = page.last_id;
    }
    assert.equal(ids.length, 4);
    const noVersion = await fetch(`${fake.url}/models`, { headers: { 'x-api-key': fake.validKey } });
    assert.equal(noVersion.status, 400);
    const bad = await fetch(`${fake.url}/models`, { headers: { ...h, 'x-api-key': 'bad' } });
    assert.equal(bad.status, 401);
    assert.deepEqual(((await bad.json()) as { error: unknown }).error, { type: 'authentication_error', message: 'invalid x-api-key' });
    const msg = { model: 'claude-x', max_tokens: 100, stream: true, system: 'be brief', messages: [{ role: 'user', content: 'hi' }] };
    assert.equal((await post(`${fake.url}/messages`, h, { ...msg, max_tokens: undefined })).status, 400);
    const events = parseSse(await (await post(`${fake.url}/messages`, h, msg)).text());
    assert.deepEqual(
      events.map((e) => e.event),
      ['message_start', 'content_block_start', 'ping', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
    );
    assert.equal((json(events[6])['delta'] as { stop_reason: string }).stop_reason, 'end_turn');
    fake.enqueueStream({ errorAfterChunks: 1 });
    const errored = parseSse(await (await post(`${fake.url}/messages`, h, msg)).text());
    assert.equal(errored.at(-1)?.event, 'error');
    assert.deepEqual(json(errored.at(-1)), { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
  } finally {
    await fake.close();
  }
});

test('gemini: key forms, pagination, SSE chunks with CRLF', async () => {
  const fake = await startGeminiFake({ pageSize: 3 });
  try {
    const p1 = (await (await fetch(`${fake.url}/models`, { headers: { 'x-goog-api-key': fake.validKey } })).json()) as {
      models: { name: string }[];
      nextPageToken?: string;
    };
    assert.equal(p1.models.length, 3);
    assert.ok(p1.models[0]?.name.startsWith('models/'));
    assert.ok(p1.nextPageToken);
    const p2 = (await (await fetch(`${fake.url}/models?key=${fake.validKey}&pageToken=${p1.nextPageToken}`)).json()) as {
      models: unknown[];
      nextPageToken?: string;
    };
    assert.equal(p2.models.length, 1);
    assert.equal(p2.nextPageToken, undefined);
    const bad = await fetch(`${fake.url}/models?key=nope`);
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { details: { reason: string }[] } }).error.details[0]?.reason, 'API_KEY_INVALID');
    fake.scriptStream({ chunks: ['a', 'b'], usage: { input: 4, output: 6 } });
    const res = await post(
      `${fake.url}/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
      { 'x-goog-api-key': fake.validKey },
      { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    );
    const raw = await res.text();
    assert.ok(raw.includes('\r\n\r\n'));
    const chunks = parseSse(raw).map(json);
    assert.equal(chunks.length, 2);
    type Cand = { content: { parts: { text: string }[] }; finishReason?: string };
    const cand = (c: Record<string, unknown>): Cand | undefined => (c['candidates'] as Cand[])[0];
    assert.ok(chunks.every((c) => c['usageMetadata'] !== undefined));
    assert.equal(cand(chunks[0] ?? {})?.finishReason, undefined);
    assert.equal(cand(chunks[1] ?? {})?.finishReason, 'STOP');
    assert.equal((chunks[1]?.['usageMetadata'] as { totalTokenCount: number }).totalTokenCount, 10);
    fake.enqueueStream({ errorAfterChunks: 1 });
    const errored = parseSse(
      await (
        await post(`${fake.url}/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=${fake.validKey}`, {}, { contents: [{ parts: [{ text: 'x' }] }] })
      ).text(),
    );
    assert.equal((json(errored.at(-1))['error'] as { status: string }).status, 'INTERNAL');
  } finally {
    await fake.close();
  }
});

test('market data: polygon and fmp probes', async () => {
  const polygon = await startPolygonFake();
  const fmp = await startFmpFake();
  try {
    const ok = await fetch(`${polygon.url}/v1/marketstatus/now?apiKey=${polygon.validKey}`);
    assert.equal(((await ok.json()) as { market: string }).market, 'open');
    assert.equal((await fetch(`${polygon.url}/v1/marketstatus/now`, { headers: { authorization: `Bearer ${polygon.validKey}` } })).status, 200);
    const bad = await fetch(`${polygon.url}/v1/marketstatus/now?apiKey=nope`);
    assert.equal(bad.status, 401);
    assert.equal(((await bad.json()) as { error: string }).error, 'Unknown API Key');
    polygon.setProbe('forbidden');
    assert.equal((await fetch(`${polygon.url}/v1/marketstatus/now?apiKey=${polygon.validKey}`)).status, 403);
    const quote = await fetch(`${fmp.url}/quote?symbol=AAPL&apikey=${fmp.validKey}`);
    assert.equal(((await quote.json()) as { symbol: string }[])[0]?.symbol, 'AAPL');
    const fbad = await fetch(`${fmp.url}/quote?symbol=AAPL&apikey=nope`);
    assert.equal(fbad.status, 401);
    assert.match(((await fbad.json()) as Record<string, string>)['Error Message'] ?? '', /^Invalid API KEY\./);
  } finally {
    await polygon.close();
    await fmp.close();
  }
});

test('stripe: stripe-node session create, idempotency, errors, webhook signature', async () => {
  const fake = await startStripeFake();
  const stripe = new Stripe(fake.validKey, { host: '127.0.0.1', port: fake.port, protocol: 'http', maxNetworkRetries: 0 });
  try {
    const session = await stripe.checkout.sessions.create({
      mode: 'payment',
      client_reference_id: 'user-1',
      line_items: [{ quantity: 2, price_data: { currency: 'usd', unit_amount: 500, product_data: { name: '500 credits' } } }],
      metadata: { userId: 'user-1', packId: 'credits_500' },
      payment_intent_data: { metadata: { userId: 'user-1' } },
      success_url: 'http://localhost/ok',
    });
    assert.match(session.id, /^cs_test_/);
    assert.equal(session.amount_total, 1000);
    assert.equal(session.url, `${fake.url}/c/pay/${session.id}`);
    assert.deepEqual(session.metadata, { userId: 'user-1', packId: 'credits_500' });
    const params = fake.checkouts[0]?.params as {
      line_items: { price_data: { unit_amount: string } }[];
      payment_intent_data: { metadata: Record<string, string> };
    };
    assert.equal(params.line_items[0]?.price_data.unit_amount, '500');
    assert.deepEqual(params.payment_intent_data.metadata, { userId: 'user-1' });
    assert.equal((await stripe.checkout.sessions.retrieve(session.id)).id, session.id);

    const form =
      'mode=payment&line_items[0][price_data][currency]=usd&line_items[0][price_data][unit_amount]=100&line_items[0][price_data][product_data][name]=x';
    const send = (body: string): Promise<Response> =>
      fetch(`${fake.url}/v1/checkout/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fake.validKey}`, 'content-type': 'application/x-www-form-urlencoded', 'idempotency-key': 'idem-1' },
        body,
      });
    const a = (await (await send(form)).json()) as { id: string };
    const replay = await send(form);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(((await replay.json()) as { id: string }).id, a.id);
    const conflict = await send(`${form}&metadata[x]=1`);
    assert.equal(conflict.status, 400);
    assert.equal(((await conflict.json()) as { error: { type: string } }).error.type, 'idempotency_error');

    fake.failNext(402);
    await assert.rejects(stripe.checkout.sessions.retrieve(session.id), { type: 'StripeCardError' });
    await assert.rejects(
      new Stripe('sk_test_wrong_key_0000', { host: '127.0.0.1', port: fake.port, protocol: 'http' }).checkout.sessions.retrieve(session.id),
      { type: 'StripeAuthenticationError' },
    );

    const payload = JSON.stringify(makeStripeEvent('checkout.session.completed', fake.completeSession(session.id)));
    const event = stripe.webhooks.constructEvent(payload, signStripePayload(payload, 'whsec_test'), 'whsec_test');
    assert.equal(event.type, 'checkout.session.completed');
    assert.throws(() => stripe.webhooks.constructEvent(payload, signStripePayload(payload, 'whsec_test', Math.floor(Date.now() / 1000) - 301), 'whsec_test'));

    fake.setProbe('stall');
    await assert.rejects(fetch(`${fake.url}/v1/checkout/sessions/${session.id}`, { signal: AbortSignal.timeout(150) }));
  } finally {
    await fake.close();
  }
});
