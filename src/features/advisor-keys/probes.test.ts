import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import fc from 'fast-check';
import { BUILT_IN_CATALOGUE } from '../../catalogue.ts';
import { probeMarketDataKey } from '../../providers/market-data/probes.ts';
import { probeProviderKey } from '../../providers/llm/probes.ts';
import { sendJson, startFake, startAnthropicFake, startGeminiFake, type FakeHandler, type FakeServer } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { chooseDefaultModel } from './default-model.ts';
import { newUser, PROBE_DEADLINE_MS } from '../../../test/kits/advisor-keys.ts';

// Every fake here answers: the deadline must never be what ends the probe.
const opts = (baseUrl: string) => ({ baseUrl, timeoutMs: PROBE_DEADLINE_MS.answered });

async function withFake(handler: FakeHandler, run: (fake: FakeServer) => Promise<void>): Promise<void> {
  const fake = await startFake(handler);
  try {
    await run(fake);
  } finally {
    await fake.close();
  }
}

describe('probe pagination reaches the default model on a later page (DESIGN §6)', () => {
  let t: TestApp;
  const anthropicModels = [
    'claude-opus-4-1-20250805',
    'claude-sonnet-4-20250514',
    'claude-3-7-sonnet-20250219',
    'claude-3-haiku-20240307',
    'claude-haiku-4-5-20251001',
  ];
  const geminiModels = ['gemini-1.5-pro', 'text-embedding-004', 'gemini-2.5-pro', 'gemma-3-27b-it', 'gemini-2.5-flash'];
  let anthropic: Awaited<ReturnType<typeof startAnthropicFake>>;
  let gemini: Awaited<ReturnType<typeof startGeminiFake>>;
  before(async () => {
    anthropic = await startAnthropicFake({ models: anthropicModels, pageSize: 2 });
    gemini = await startGeminiFake({ models: geminiModels, pageSize: 2 });
    t = await buildTestApp({ env: { ANTHROPIC_BASE_URL: anthropic.url, GOOGLE_BASE_URL: gemini.url } });
  });
  after(async () => {
    await t.close();
    await Promise.all([anthropic.close(), gemini.close()]);
  });

  test('spec 4.2 rule 6: Anthropic pages with after_id until has_more is false', async () => {
    const res = await t.call('PUT', '/api/advisor/provider-keys/anthropic', { user: newUser(), body: { apiKey: anthropic.validKey } });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json<{ defaultModel: string }>().defaultModel, 'claude-haiku-4-5-20251001');
    assert.deepEqual(
      anthropic.requests.map((r) => r.query['after_id']),
      [undefined, 'claude-sonnet-4-20250514', 'claude-3-haiku-20240307'],
    );
  });

  test('spec 4.2 rule 6: Gemini pages with pageToken, strips models/ and skips non-chat models', async () => {
    const res = await t.call('PUT', '/api/advisor/provider-keys/google', { user: newUser(), body: { apiKey: gemini.validKey } });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json<{ defaultModel: string }>().defaultModel, 'gemini-2.5-flash');
    assert.equal(gemini.requests.length, 3);
    assert.equal(gemini.requests[0]?.query['pageToken'], undefined);
    assert.ok(gemini.requests.slice(1).every((r) => typeof r.query['pageToken'] === 'string'));
    const listed = await t.call('PUT', '/api/advisor/provider-keys/google', {
      user: newUser(),
      body: { apiKey: gemini.validKey, defaultModel: 'text-embedding-004' },
    });
    assert.equal(listed.statusCode, 400, 'an embedding model is not a chat model the key can use');
  });
});

describe('probe reading of edge answers (DESIGN §6)', () => {
  test('Google: a 400 without reason API_KEY_INVALID is transient', async () => {
    await withFake(
      (_req, res) => sendJson(res, 400, { error: { code: 400, message: 'Request contains an invalid argument.', status: 'INVALID_ARGUMENT' } }),
      async (f) =>
        assert.deepEqual(await probeProviderKey('google', 'AIza-something', opts(`${f.url}/v1beta`)), { outcome: 'transient', reason: 'unexpected' }),
    );
  });

  test('xAI: a 400 that is not "Incorrect API key" is transient; OpenAI: a 400 is transient', async () => {
    await withFake(
      (_req, res) => sendJson(res, 400, { code: 'Client specified an invalid argument', error: 'Unsupported query parameter' }),
      async (f) => {
        assert.deepEqual(await probeProviderKey('xai', 'xai-something', opts(`${f.url}/v1`)), { outcome: 'transient', reason: 'unexpected' });
        assert.deepEqual(await probeProviderKey('openai', 'sk-something', opts(`${f.url}/v1`)), { outcome: 'transient', reason: 'unexpected' });
      },
    );
  });

  test('OpenRouter: key accepted but the public model list fails → valid without a list', async () => {
    await withFake(
      (req, res) => (req.path.endsWith('/key') ? sendJson(res, 200, { data: { label: 'x' } }) : sendJson(res, 503, { error: { message: 'down' } })),
      async (f) => assert.deepEqual(await probeProviderKey('openrouter', 'sk-or-v1-x', opts(`${f.url}/api/v1`)), { outcome: 'valid', models: undefined }),
    );
  });

  test('Anthropic: a later page failing keeps the key verified, without a list', async () => {
    await withFake(
      (req, res) =>
        req.query['after_id'] === undefined
          ? sendJson(res, 200, { data: [{ id: 'claude-a' }], has_more: true, last_id: 'claude-a' })
          : sendJson(res, 529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }),
      async (f) => assert.deepEqual(await probeProviderKey('anthropic', 'sk-ant-x', opts(`${f.url}/v1`)), { outcome: 'valid', models: undefined }),
    );
  });

  test('a 2xx that is not a model list, and a redirect, are transient (nothing followed)', async () => {
    await withFake(
      (req, res) => {
        if (req.query['go'] !== undefined || req.path.includes('redirect')) {
          res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' });
          res.end();
          return;
        }
        sendJson(res, 200, { html: 'portal' });
      },
      async (f) => {
        assert.deepEqual(await probeProviderKey('openai', 'sk-x-12345678', opts(`${f.url}/v1`)), { outcome: 'transient', reason: 'unexpected' });
        assert.deepEqual(await probeProviderKey('anthropic', 'sk-x-12345678', opts(`${f.url}/redirect`)), { outcome: 'transient', reason: 'unexpected' });
        assert.equal(f.requests.length, 2);
      },
    );
  });

  test('network error (nothing listening) is transient', async () => {
    const f = await startFake(() => undefined);
    const url = f.url;
    await f.close();
    assert.deepEqual(await probeProviderKey('groq', 'gsk-x-12345678', opts(`${url}/openai/v1`)), { outcome: 'transient', reason: 'network' });
  });

  test('FMP: an "Error Message" under a 200 is a refusal; its usage-limit message is transient', async () => {
    let message = 'Invalid API KEY. Feel free to create a Free API Key.';
    await withFake(
      (_req, res) => sendJson(res, 200, { 'Error Message': message }),
      async (f) => {
        assert.deepEqual(await probeMarketDataKey('fmp', 'fmp-x-12345678', opts(`${f.url}/stable`)), { outcome: 'invalid', status: 200 });
        message = 'Limit Reach . Please upgrade your plan';
        assert.deepEqual(await probeMarketDataKey('fmp', 'fmp-x-12345678', opts(`${f.url}/stable`)), { outcome: 'transient', reason: 'rate-limited' });
      },
    );
  });
});

describe('probe deadline (spec 4.2 rules 2 and 5: one 5 s timeout, then the key is stored unverified)', () => {
  const stalled: FakeHandler = () => new Promise<void>(() => undefined);
  const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

  test('a stalled provider is cut at the deadline → transient "timeout"; a finished probe leaves no timer scheduled', async () => {
    await withFake(stalled, async (f) => {
      const started = performance.now();
      assert.deepEqual(await probeProviderKey('openai', 'sk-x-12345678', { baseUrl: `${f.url}/v1`, timeoutMs: PROBE_DEADLINE_MS.stalled }), {
        outcome: 'transient',
        reason: 'timeout',
      });
      // The fake never answers, so only the deadline ends the probe: nothing else would within undici's own 300 s.
      assert.ok(performance.now() - started < 30_000);
    });
    await withFake(
      (_req, res) => sendJson(res, 200, { data: [{ id: 'gpt-4o' }] }),
      async (f) => {
        const before = timeouts();
        assert.deepEqual(await probeProviderKey('openai', 'sk-x-12345678', { baseUrl: `${f.url}/v1`, timeoutMs: 60_000 }), {
          outcome: 'valid',
          models: ['gpt-4o'],
        });
        assert.equal(timeouts(), before);
      },
    );
  });

  test("the caller's signal ends a probe at once; an already-aborted one calls no provider", async () => {
    await withFake(stalled, async (f) => {
      const caller = new AbortController();
      const probe = probeMarketDataKey('polygon', 'pg-x-12345678', { baseUrl: f.url, timeoutMs: 10 * 60_000, signal: caller.signal });
      while (f.requests.length === 0) await delay(5);
      const abortedAt = performance.now();
      caller.abort();
      assert.deepEqual(await probe, { outcome: 'transient', reason: 'timeout' });
      // The fake never answers and the deadline is 10 minutes away: only the caller's signal ends it.
      assert.ok(performance.now() - abortedAt < 30_000);
      assert.equal(f.requests.length, 1);
      assert.deepEqual(await probeMarketDataKey('polygon', 'pg-x-12345678', { baseUrl: f.url, timeoutMs: 60_000, signal: AbortSignal.abort() }), {
        outcome: 'transient',
        reason: 'timeout',
      });
      assert.equal(f.requests.length, 1);
    });
  });
});

describe('default model rule (spec 4.2 rule 6)', () => {
  const catalogue = BUILT_IN_CATALOGUE;
  const pool = [
    'gpt-4o-mini',
    'gpt-4.1-mini',
    'gpt-5-mini',
    'gpt-4o',
    'o3',
    'o4-mini',
    'chatgpt-4o-latest',
    'text-embedding-3-small',
    'whisper-1',
    'tts-1-hd',
    'dall-e-3',
    'gpt-image-1',
    'omni-moderation-latest',
    'gpt-4o-realtime-preview',
    'gpt-4o-mini-transcribe',
    'gpt-4o-search-preview',
    'davinci-002',
    'zzz-custom',
    'aaa-custom-embed',
  ];

  test('the same set of models in any order (with duplicates) gives the same default', () => {
    fc.assert(
      fc.property(fc.subarray(pool), fc.func(fc.integer()), (subset, rank) => {
        const shuffledList = [...subset, ...subset.slice(0, 2)].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
        assert.equal(chooseDefaultModel(catalogue, 'openai', shuffledList), chooseDefaultModel(catalogue, 'openai', [...subset].sort()));
      }),
      { numRuns: 300 },
    );
  });

  test('preferences first (dated snapshots count, newest wins), then priced chat models, then any chat model', () => {
    assert.equal(chooseDefaultModel(catalogue, 'openai', ['gpt-5-mini', 'gpt-4.1-mini']), 'gpt-4.1-mini');
    assert.equal(
      chooseDefaultModel(catalogue, 'anthropic', ['claude-haiku-4-5-20251001', 'claude-haiku-4-5-20260101', 'claude-sonnet-4-5']),
      'claude-haiku-4-5-20260101',
    );
    assert.equal(chooseDefaultModel(catalogue, 'openai', ['chatgpt-4o-latest', 'o3', 'text-embedding-3-small']), 'o3');
    assert.equal(chooseDefaultModel(catalogue, 'openai', ['zzz-custom', 'whisper-1', 'aaa-custom-embed']), 'zzz-custom');
    assert.equal(chooseDefaultModel(catalogue, 'openai', ['whisper-1', 'dall-e-3']), 'gpt-4o-mini');
    assert.equal(chooseDefaultModel(catalogue, 'openai', undefined), 'gpt-4o-mini');
  });
});
