import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PROVIDERS, type Provider } from '../../catalogue.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import type { AnthropicFake, GeminiFake, OpenAiCompatibleFake, RecordedRequest, StreamScript } from '../../../test/fakes/index.ts';
import { startAnthropicFake, startGeminiFake, startOpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { IMAGES, image, message, newUser, replyRow, saveKey, send, startOf, textOf, type StreamResult } from '../../../test/kits/conversations.ts';
import { FAKE_DEFAULT_MODEL } from '../../../test/kits/advisor-keys.ts';

type Fake = OpenAiCompatibleFake | AnthropicFake | GeminiFake;
const OPENAI_STYLE = ['openai', 'mistral', 'xai', 'groq', 'deepseek', 'openrouter'] as const;

/** Models each user's key ends up with (the probe's default); all in the built-in catalogue. */
const MODEL = FAKE_DEFAULT_MODEL;

describe('advisor stream: provider protocols', () => {
  const fakes = {} as Record<Provider, Fake>;
  let t: TestApp;
  before(async () => {
    for (const f of OPENAI_STYLE) fakes[f] = await startOpenAiCompatibleFake({ flavor: f });
    fakes.anthropic = await startAnthropicFake();
    fakes.google = await startGeminiFake();
    t = await buildTestApp({ env: Object.fromEntries(PROVIDERS.map((p) => [`${p.toUpperCase()}_BASE_URL`, fakes[p].url])) });
  });
  after(async () => {
    await t.close();
    await Promise.all(Object.values(fakes).map((f) => f.close()));
  });

  /** A user with a saved key for `p`, then one message with the next stream scripted. */
  async function turn(p: Provider, script: StreamScript = {}, body = message()): Promise<{ res: StreamResult; user: string; upstream: RecordedRequest }> {
    const user = newUser(p);
    await saveKey(t, user, p, fakes[p].validKey);
    fakes[p].enqueueStream(script);
    const before = fakes[p].streams.length;
    const res = await send(t, user, null, body);
    const upstream = fakes[p].streams[before]?.request;
    assert.ok(upstream, `${p} received no stream request: ${res.body}`);
    return { res, user, upstream };
  }

  const errorOf = (r: StreamResult) => r.frames.find((f) => f.event === 'error')?.data;

  for (const p of PROVIDERS) {
    describe(p, () => {
      test(`DESIGN §7: ${p} happy path → start, deltas, done with usage; ids increase; reply stored complete`, async () => {
        const { res, upstream } = await turn(p, { chunks: ['Buy', ' low,', ' sell high'], usage: { input: 42, output: 7 } });
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
        assert.equal(res.headers['cache-control'], 'no-cache, no-transform');
        assert.equal(res.headers['x-accel-buffering'], 'no');
        assert.ok(res.headers['x-request-id']);
        assert.deepEqual(
          res.frames.map((f) => f.event),
          ['start', 'delta', 'delta', 'delta', 'done'],
        );
        assert.deepEqual(
          res.frames.map((f) => f.id),
          [1, 2, 3, 4, 5],
        );
        const start = startOf(res);
        assert.deepEqual([start['provider'], start['model'], start['billing']], [p, MODEL[p], { source: 'allowance', credits: 0 }]);
        assert.equal(textOf(res), 'Buy low, sell high');
        const done = res.frames.at(-1)?.data ?? {};
        const usage = done['usage'] as Record<string, unknown>;
        // Each provider's cached, reasoning and cost figures: usage.test.ts (DESIGN §13).
        assert.deepEqual([done['finishReason'], done['toolCalls'], usage['inputTokens'], usage['outputTokens']], ['stop', 0, 42, 7]);
        const stored = await replyRow(t, String(start['assistantMessageId']));
        assert.deepEqual(
          [stored?.status, stored?.content, stored?.finish_reason, stored?.input_tokens, stored?.output_tokens],
          ['complete', 'Buy low, sell high', 'stop', 42, 7],
        );
        assertWireFormat(p, upstream, fakes[p]);
      });

      for (const reason of ['length', 'content_filter'] as const) {
        test(`DESIGN §7: ${p} finish reason ${reason} → done.finishReason ${reason}`, async () => {
          const { res } = await turn(p, { chunks: ['Partial'], finishReason: reason });
          assert.equal(res.frames.at(-1)?.event, 'done');
          assert.equal(res.frames.at(-1)?.data['finishReason'], reason);
        });
      }

      const before: [StreamScript, string, boolean, string][] = [
        [{ status: 401 }, 'PROVIDER_AUTH_FAILED', false, '401'],
        [{ status: 429 }, 'PROVIDER_RATE_LIMITED', true, '429'],
        [{ status: 500 }, 'PROVIDER_UNAVAILABLE', true, '500'],
      ];
      if (p === 'anthropic') before.push([{ status: 529 }, 'PROVIDER_UNAVAILABLE', true, '529 overloaded']);
      for (const [script, code, retryable, what] of before) {
        test(`DESIGN §7: ${p} answers ${what} before any chunk → start then error ${code}; stored failed`, async () => {
          const { res } = await turn(p, script);
          assert.equal(res.statusCode, 200);
          assert.deepEqual(
            res.frames.map((f) => f.event),
            ['start', 'error'],
          );
          assert.deepEqual(errorOf(res)?.['code'], code);
          assert.equal(errorOf(res)?.['retryable'], retryable);
          const stored = await replyRow(t, String(startOf(res)['assistantMessageId']));
          assert.deepEqual([stored?.status, stored?.content, stored?.error_code], ['failed', '', code]);
        });
      }

      test(`DESIGN §7: ${p} error inside the stream after a chunk → the delta, then error; stored failed with that delta`, async () => {
        const { res } = await turn(p, { chunks: ['One', ' two', ' three'], errorAfterChunks: 2 });
        assert.deepEqual(
          res.frames.map((f) => f.event),
          ['start', 'delta', 'delta', 'error'],
        );
        // Every fake's in-stream error is a server-side one (overloaded_error, server_error, INTERNAL).
        assert.equal(errorOf(res)?.['code'], 'PROVIDER_UNAVAILABLE');
        assert.equal(errorOf(res)?.['retryable'], true);
        const stored = await replyRow(t, String(startOf(res)['assistantMessageId']));
        assert.deepEqual([stored?.status, stored?.content], ['failed', 'One two']);
      });

      test(`DESIGN §7: ${p} connection dropped mid-stream → error PROVIDER_UNAVAILABLE`, async () => {
        const { res } = await turn(p, { chunks: ['One', ' two', ' three'], dropAfterChunks: 1 });
        assert.deepEqual(
          res.frames.map((f) => f.event),
          ['start', 'delta', 'error'],
        );
        assert.equal(errorOf(res)?.['code'], 'PROVIDER_UNAVAILABLE');
      });

      test(`DESIGN §7: ${p} malformed chunk → error PROVIDER_ERROR after the good deltas`, async () => {
        const { res } = await turn(p, { chunks: ['One', ' two'], malformedAfterChunks: 1 });
        assert.deepEqual(
          res.frames.map((f) => f.event),
          ['start', 'delta', 'error'],
        );
        assert.equal(errorOf(res)?.['code'], 'PROVIDER_ERROR');
        assert.equal(textOf(res), 'One');
      });
    });
  }

  for (const p of ['xai', 'google', 'openai', 'anthropic'] as const) {
    test(`DESIGN §7: a key the ${p} provider no longer accepts (${p === 'xai' || p === 'google' ? 'its 400' : '401'}) → error PROVIDER_AUTH_FAILED, not retryable`, async () => {
      const user = newUser(p);
      const key = `${fakes[p].validKey}-revoked`;
      fakes[p].addValidKey(key);
      await saveKey(t, user, p, key);
      fakes[p].removeValidKey(key);
      const res = await send(t, user, null, message());
      assert.deepEqual(
        res.frames.map((f) => f.event),
        ['start', 'error'],
      );
      assert.deepEqual(errorOf(res), { code: 'PROVIDER_AUTH_FAILED', message: errorOf(res)?.['message'], retryable: false });
      assert.ok(!res.body.includes(key), 'the key never reaches the client');
      assert.ok(!t.logs.some((line) => line.includes(key)), 'the key never reaches a log line');
    });
  }

  test('DESIGN §7: Gemini events separated by plain LF parse the same as CRLF', async () => {
    const lf = await startGeminiFake({ lineEnding: '\n' });
    const app = await buildTestApp({ env: { GOOGLE_BASE_URL: lf.url } });
    try {
      const user = newUser('lf');
      await saveKey(app, user, 'google', lf.validKey);
      lf.enqueueStream({ chunks: ['a', 'b', 'c'] });
      const res = await send(app, user, null, message());
      assert.deepEqual(
        res.frames.map((f) => f.event),
        ['start', 'delta', 'delta', 'delta', 'done'],
      );
    } finally {
      await app.close();
      await lf.close();
    }
  });

  for (const p of ['openai', 'mistral', 'anthropic', 'google'] as const) {
    test(`DESIGN §7: images reach ${p} in its own format, after the checks`, async () => {
      const { res, upstream } = await turn(p, {}, message('What do you see?', { attachments: [image('png'), image('jpeg'), image('webp')] }));
      assert.equal(res.statusCode, 200, res.body);
      const body = upstream.json as Record<string, unknown>;
      const b64 = (f: keyof typeof IMAGES) => IMAGES[f].toString('base64');
      const mime = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' } as const;
      const formats = ['png', 'jpeg', 'webp'] as const;
      if (p === 'google') {
        const contents = body['contents'] as { role: string; parts: unknown[] }[];
        assert.deepEqual(contents.at(-1), {
          role: 'user',
          parts: [...formats.map((f) => ({ inlineData: { mimeType: mime[f], data: b64(f) } })), { text: 'What do you see?' }],
        });
      } else if (p === 'anthropic') {
        const messages = body['messages'] as { role: string; content: unknown }[];
        assert.deepEqual(messages.at(-1), {
          role: 'user',
          content: [
            ...formats.map((f) => ({ type: 'image', source: { type: 'base64', media_type: mime[f], data: b64(f) } })),
            { type: 'text', text: 'What do you see?' },
          ],
        });
      } else {
        const messages = body['messages'] as { role: string; content: unknown }[];
        assert.deepEqual(messages.at(-1), {
          role: 'user',
          content: [
            { type: 'text', text: 'What do you see?' },
            ...formats.map((f) => ({ type: 'image_url', image_url: { url: `data:${mime[f]};base64,${b64(f)}` } })),
          ],
        });
      }
    });
  }

  for (const p of ['openai', 'anthropic', 'google'] as const) {
    test(`DESIGN §7: ${p} gets the persona's system prompt and the earlier turns of the conversation`, async () => {
      const user = newUser(p);
      await saveKey(t, user, p, fakes[p].validKey);
      fakes[p].enqueueStream({ chunks: ['First', ' answer'] });
      const first = await send(t, user, null, message('First question', { personaId: 'risk-manager' }));
      const conversationId = String(startOf(first)['conversationId']);
      fakes[p].enqueueStream({ chunks: ['Second answer'] });
      const n = fakes[p].streams.length;
      const second = await send(t, user, conversationId, message('Second question'));
      assert.equal(second.statusCode, 200, second.body);
      assert.equal(startOf(second)['conversationId'], conversationId);
      const body = fakes[p].streams[n]?.request.json as Record<string, unknown>;
      const prompt = t.deps.config.catalogue.personas.find((x) => x.personaId === 'risk-manager')?.systemPrompt;
      const turns: [string, string][] = [
        ['user', 'First question'],
        ['assistant', 'First answer'],
        ['user', 'Second question'],
      ];
      let system: unknown;
      if (p === 'google') {
        system = (body['systemInstruction'] as { parts: { text: string }[] }).parts[0]?.text;
        assert.deepEqual(
          body['contents'],
          turns.map(([role, text]) => ({ role: role === 'assistant' ? 'model' : 'user', parts: [{ text }] })),
        );
      } else if (p === 'anthropic') {
        system = body['system'];
        assert.deepEqual(
          body['messages'],
          turns.map(([role, content]) => ({ role, content })),
        );
      } else {
        const [first, ...rest] = body['messages'] as { role: string; content: unknown }[];
        assert.equal(first?.role, 'system');
        system = first?.content;
        assert.deepEqual(
          rest,
          turns.map(([role, content]) => ({ role, content })),
        );
      }
      // DESIGN §11: the advisor's own prompt (the date, what it may look up), then the persona's.
      assert.ok(typeof system === 'string' && system.endsWith(`\n\n${prompt}`) && / UTC /.test(system), String(system));
    });
  }
});

/** The request each protocol must send: endpoint, key placement, streaming options, output cap. */
function assertWireFormat(p: Provider, req: RecordedRequest, fake: Fake): void {
  const body = req.json as Record<string, unknown>;
  assert.equal(req.method, 'POST');
  if (p === 'anthropic') {
    assert.equal(req.path, '/v1/messages');
    assert.equal(req.headers['x-api-key'], fake.validKey);
    assert.equal(req.headers['anthropic-version'], '2023-06-01');
    assert.deepEqual([body['model'], body['stream'], body['max_tokens']], [MODEL[p], true, 8192]);
    return;
  }
  if (p === 'google') {
    assert.equal(req.path, `/v1beta/models/${MODEL[p]}:streamGenerateContent`);
    assert.equal(req.query['alt'], 'sse');
    assert.equal(req.headers['x-goog-api-key'], fake.validKey);
    assert.equal(req.query['key'], undefined, 'the key is not put in the URL');
    assert.deepEqual(body['generationConfig'], { maxOutputTokens: 8192 });
    return;
  }
  assert.equal(req.path, p === 'openrouter' ? '/api/v1/chat/completions' : '/v1/chat/completions');
  assert.equal(req.headers['authorization'], `Bearer ${fake.validKey}`);
  assert.deepEqual([body['model'], body['stream']], [MODEL[p], true]);
  // Mistral rejects stream_options (it reports usage on its finishing chunk anyway).
  assert.deepEqual(body['stream_options'], p === 'mistral' ? undefined : { include_usage: true });
  const cap = p === 'openai' || p === 'groq' ? 'max_completion_tokens' : 'max_tokens';
  assert.equal(body[cap], 8192);
}
