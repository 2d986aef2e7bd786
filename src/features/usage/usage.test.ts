// DESIGN §13: usage receipts — each provider's own figures in one meaning, priced in integer
// micro-dollars, stored on the reply, summed per day/model/provider against the ledger; a key the
// provider refuses during a turn is marked. Real app, loopback provider fakes in their wire formats.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { PROVIDERS, type Provider } from '../../catalogue.ts';
import type { RoundUsage } from '../../providers/llm/index.ts';
import type { StreamScript } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { startKeyFakes, type KeyFakes } from '../../../test/kits/advisor-keys.ts';
import { giveCredits } from '../../../test/kits/billing.ts';
import { closingStatement } from '../conversations/turn-statements.ts';
import type { ChargeRow } from '../billing/turn-billing.ts';
import { message, newUser, saveKey, send, startOf, type StreamResult } from '../../../test/kits/conversations.ts';
import { NO_RECEIPT, receiptOf } from './receipt.ts';

type Json = Record<string, unknown>;
const round = (u: Partial<RoundUsage> & { input: number; output: number }): RoundUsage => u;

describe('receipt arithmetic (DESIGN §13)', () => {
  const pricing = { inputPerMTok: 2.5, outputPerMTok: 10, cachedInputPerMTok: 1.25 };

  test('DESIGN §13: uncached input, cached input and output are each priced at their own rate, in integer micro-dollars', () => {
    // 600 × 2.5 + 400 × 1.25 + 200 × 10 = 1500 + 500 + 2000 µ$.
    const r = receiptOf([round({ input: 1000, output: 200, cachedInput: 400, reasoning: 20 })], pricing);
    assert.deepEqual(r, { input: 1000, output: 200, cachedInput: 400, reasoning: 20, costMicros: 4000 });
  });

  test('DESIGN §13: cached input is priced as input when the model has no cache price or the provider reports no cache figure', () => {
    assert.equal(receiptOf([round({ input: 1000, output: 0, cachedInput: 400 })], { inputPerMTok: 2.5, outputPerMTok: 10 }).costMicros, 2500);
    assert.equal(receiptOf([round({ input: 1000, output: 0, cachedInput: null })], pricing).costMicros, 2500);
  });

  test('DESIGN §13: a turn is rounded to the micro-dollar once (half up), after its rounds are summed exactly', () => {
    const cheap = { inputPerMTok: 0.15, outputPerMTok: 0.6 };
    // 3 × 0.15 = 0.45 µ$ → 0; 4 × 0.15 = 0.6 µ$ → 1; three rounds of 1 token: 0.45 µ$ in all → 0, not 3 × 0.
    assert.equal(receiptOf([round({ input: 3, output: 0 })], cheap).costMicros, 0);
    assert.equal(receiptOf([round({ input: 4, output: 0 })], cheap).costMicros, 1);
    assert.equal(
      receiptOf([round({ input: 1, output: 0 }), round({ input: 1, output: 0 }), round({ input: 1, output: 0 }), round({ input: 1, output: 0 })], cheap)
        .costMicros,
      1,
    );
    // 0.1 + 0.2 drifts in binary floating point; pico-dollar integers do not: 7 rounds of 0.1 µ$ + 0.2 µ$ = 2.1 µ$.
    const tenths = { inputPerMTok: 0.1, outputPerMTok: 0.2 };
    const rounds = Array.from({ length: 7 }, () => round({ input: 1, output: 1 }));
    assert.equal(receiptOf(rounds, tenths).costMicros, 2);
    assert.equal(
      receiptOf(
        Array.from({ length: 5 }, () => round({ input: 1, output: 1 })),
        tenths,
      ).costMicros,
      2,
      '1.5 µ$ rounds half up',
    );
  });

  test('DESIGN §13: the provider’s own reported cost wins over the catalogue’s prices', () => {
    assert.equal(receiptOf([round({ input: 1000, output: 200, costUsd: 0.0001 })], pricing).costMicros, 100);
  });

  test('DESIGN §13: figures sum over rounds; a part or a cost some round did not give is null for the turn, never a guess', () => {
    const r = receiptOf(
      [round({ input: 100, output: 10, cachedInput: 50, reasoning: null }), round({ input: 200, output: 20, cachedInput: null, reasoning: 5 })],
      undefined,
    );
    assert.deepEqual(r, { input: 300, output: 30, cachedInput: null, reasoning: null, costMicros: null });
    assert.deepEqual(receiptOf([], pricing), NO_RECEIPT);
  });
});

describe('usage receipts end to end (DESIGN §13)', () => {
  let fakes: KeyFakes;
  let t: TestApp;
  before(async () => {
    fakes = await startKeyFakes();
    t = await buildTestApp({ env: fakes.env() });
  });
  after(async () => {
    await t.close();
    await fakes.close();
  });

  const llm = (p: Provider) => fakes.providers[p];
  const doneUsage = (r: StreamResult): Json => (r.frames.at(-1)?.data['usage'] as Json | undefined) ?? {};

  async function turn(p: Provider, user: string, script: StreamScript, conversationId: string | null = null): Promise<StreamResult> {
    llm(p).enqueueStream(script);
    const res = await send(t, user, conversationId, message());
    assert.equal(res.statusCode, 200, res.body);
    return res;
  }

  async function storedUsage(user: string, res: StreamResult): Promise<Json | null> {
    const conv = await t.call('GET', `/api/advisor/conversations/${String(startOf(res)['conversationId'])}`, { user });
    assert.equal(conv.statusCode, 200, conv.body);
    const reply = conv.json<{ messages: Json[] }>().messages.find((m) => m['id'] === startOf(res)['assistantMessageId']);
    return (reply?.['usage'] as Json | null | undefined) ?? null;
  }

  // The fakes write { input 1200, output 300, cache reads 200, cache writes 100, reasoning 50 } in each
  // provider's own fields; costs are the built-in catalogue's prices for the fakes' default models,
  // worked out by hand (µ$ per token = USD per million tokens).
  const SCRIPTED = { input: 1200, output: 300, cached: 200, cacheWrite: 100, reasoning: 50, cost: 0.0025 };
  const EXPECTED: Record<Provider, { cached: number | null; reasoning: number | null; cost: number }> = {
    // gpt-4o-mini: 1000 × 0.15 + 200 × 0.075 + 300 × 0.6 = 150 + 15 + 180
    openai: { cached: 200, reasoning: 50, cost: 0.000345 },
    // claude-haiku-4-5 (cache reads and writes reported apart from input_tokens; thinking inside output): 1000 × 1 + 200 × 0.1 + 300 × 5
    anthropic: { cached: 200, reasoning: null, cost: 0.00252 },
    // gemini-2.5-flash (thoughts apart from candidates): 1000 × 0.3 + 200 × 0.03 + 300 × 2.5
    google: { cached: 200, reasoning: 50, cost: 0.001056 },
    // mistral-small: no cache or reasoning figures: 1200 × 0.1 + 300 × 0.3
    mistral: { cached: null, reasoning: null, cost: 0.00021 },
    // grok-3-mini: 1000 × 0.3 + 200 × 0.075 + 300 × 0.5
    xai: { cached: 200, reasoning: 50, cost: 0.000465 },
    // llama-3.3-70b-versatile: 1200 × 0.59 + 300 × 0.79
    groq: { cached: null, reasoning: null, cost: 0.000945 },
    // deepseek-chat (prompt_cache_hit_tokens): 1000 × 0.28 + 200 × 0.028 + 300 × 0.42 = 411.6 → 412
    deepseek: { cached: 200, reasoning: 50, cost: 0.000412 },
    // OpenRouter's reported cost
    openrouter: { cached: 200, reasoning: 50, cost: 0.0025 },
  };

  for (const p of PROVIDERS) {
    test(`DESIGN §13: ${p} usage as ${p} reports it → done.usage in one meaning, priced, and the same on the stored reply`, async () => {
      const user = newUser(p);
      await saveKey(t, user, p, llm(p).validKey);
      const res = await turn(p, user, { chunks: ['Risk', ' first'], usage: SCRIPTED });
      const e = EXPECTED[p];
      const usage = { inputTokens: 1200, outputTokens: 300, cachedInputTokens: e.cached, reasoningTokens: e.reasoning, estimatedCostUsd: e.cost };
      assert.deepEqual(doneUsage(res), usage, res.body);
      assert.deepEqual(await storedUsage(user, res), usage);
    });
  }

  test('DESIGN §13: a stream cut off before its usage chunk stores null figures, not 0; one cut off after Anthropic’s message_start keeps its input count', async () => {
    const user = newUser('openai');
    await saveKey(t, user, 'openai', llm('openai').validKey);
    const cut = await turn('openai', user, { chunks: ['a', 'b', 'c'], dropAfterChunks: 1, usage: SCRIPTED });
    assert.equal(cut.frames.at(-1)?.event, 'error', cut.body);
    assert.deepEqual(await storedUsage(user, cut), {
      inputTokens: null,
      outputTokens: null,
      cachedInputTokens: null,
      reasoningTokens: null,
      estimatedCostUsd: null,
    });

    const claude = newUser('anthropic');
    await saveKey(t, claude, 'anthropic', llm('anthropic').validKey);
    const res = await turn('anthropic', claude, { chunks: ['a', 'b', 'c'], dropAfterChunks: 1, usage: SCRIPTED });
    assert.equal(res.frames.at(-1)?.event, 'error', res.body);
    const stored = await storedUsage(claude, res);
    // message_start reports the whole input and the output so far (1).
    assert.deepEqual([stored?.['inputTokens'], stored?.['outputTokens'], stored?.['cachedInputTokens']], [1200, 1, 200]);
  });

  test('DESIGN §13: a turn with tool rounds sums its rounds', async () => {
    const user = newUser('openai');
    await saveKey(t, user, 'openai', llm('openai').validKey);
    llm('openai').enqueueStream({ toolCalls: [{ name: 'list_my_accounts' }], usage: { input: 500, output: 20, cached: 100, reasoning: 0 } });
    const res = await turn('openai', user, { chunks: ['You have none'], usage: { input: 700, output: 30, cached: 500, reasoning: 10 } });
    // 600 × 0.15 + 600 × 0.075 + 50 × 0.6 = 90 + 45 + 30 = 165 µ$
    assert.deepEqual(doneUsage(res), { inputTokens: 1200, outputTokens: 50, cachedInputTokens: 600, reasoningTokens: 10, estimatedCostUsd: 0.000165 });
  });

  test('DESIGN §13: GET /api/advisor/usage equals the sum of the stored receipts and of the ledger (credits charged, allowance turns)', async () => {
    const user = newUser('sum');
    await saveKey(t, user, 'openai', llm('openai').validKey);
    await saveKey(t, user, 'anthropic', llm('anthropic').validKey);
    await giveCredits(t, user, 100);
    const replies: StreamResult[] = [];
    // Two allowance turns on Anthropic, then three on OpenAI's gpt-4o (5 credits each), one of which
    // fails before any delta (returned: no credits, no allowance).
    for (let i = 0; i < 2; i++) replies.push(await turn('anthropic', user, { usage: { input: 100 + i, output: 10, cached: 0 } }));
    await t.call('PATCH', '/api/advisor/provider-keys/openai', { user, body: { defaultModel: 'gpt-4o', active: true } });
    for (let i = 0; i < 2; i++) replies.push(await turn('openai', user, { usage: { input: 1000, output: 100 + i, cached: 0, reasoning: 0 } }));
    replies.push(await turn('openai', user, { status: 500 }));

    const res = await t.call('GET', '/api/advisor/usage?groupBy=model', { user });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json<{ rows: Json[]; total: Json; groupBy: string; from: string; to: string }>();
    const today = new Date().toISOString().slice(0, 10);
    assert.deepEqual([body.groupBy, body.to], ['model', today]);

    const receipts = await Promise.all(replies.map((r) => storedUsage(user, r)));
    const sum = (k: string) => receipts.reduce((n, u) => n + Number(u?.[k] ?? 0), 0);
    assert.equal(body.total['turns'], 5);
    assert.equal(body.total['inputTokens'], sum('inputTokens'));
    assert.equal(body.total['outputTokens'], sum('outputTokens'));
    assert.equal(Math.round(Number(body.total['estimatedCostUsd']) * 1e6), Math.round(sum('estimatedCostUsd') * 1e6));
    assert.equal(body.total['unpricedTurns'], 1, 'the failed turn reported nothing to price');

    const ledger = await sql<{
      spent: number | string;
    }>`select coalesce(-sum(amount), 0) as spent from ledger_entries where user_id = ${user} and kind in ('turn', 'turn-return')`.execute(t.deps.db);
    const allowance = await sql<{ n: number | string }>`select coalesce(sum(allowance_turns), 0) as n from monthly_usage where user_id = ${user}`.execute(
      t.deps.db,
    );
    assert.equal(body.total['creditsCharged'], Number(ledger.rows[0]?.spent), 'credits charged = the ledger’s turn entries net of returns');
    assert.equal(body.total['creditsCharged'], 10);
    assert.equal(body.total['allowanceTurns'], Number(allowance.rows[0]?.n), 'allowance turns = monthly usage');
    assert.equal(body.total['allowanceTurns'], 2);

    const byModel = Object.fromEntries(body.rows.map((r) => [`${String(r['provider'])}/${String(r['key'])}`, r]));
    assert.deepEqual(Object.keys(byModel).sort(), ['anthropic/claude-haiku-4-5-20251001', 'openai/gpt-4o']);
    assert.deepEqual([byModel['openai/gpt-4o']?.['turns'], byModel['openai/gpt-4o']?.['creditsCharged']], [3, 10]);

    const byProvider = (await t.call('GET', '/api/advisor/usage?groupBy=provider', { user })).json<{ rows: Json[] }>();
    assert.deepEqual(
      byProvider.rows.map((r) => [r['key'], r['turns']]),
      [
        ['anthropic', 2],
        ['openai', 3],
      ],
    );
    const byDay = (await t.call('GET', `/api/advisor/usage?from=2026-01-01&to=${today}`, { user })).json<{ rows: Json[]; total: Json }>();
    assert.equal(byDay.rows.at(-1)?.['key'], today);
    assert.equal(byDay.rows.at(-1)?.['turns'], 5);
    assert.ok(
      byDay.rows.slice(0, -1).every((r) => r['turns'] === 0 && r['estimatedCostUsd'] === 0),
      'every other day of the range is there, with zeros',
    );
    assert.deepEqual(byDay.total, body.total);
  });

  test('DESIGN §2: GET /api/advisor/usage without a token → 401 UNAUTHENTICATED', async () => {
    const res = await t.call('GET', '/api/advisor/usage');
    assert.equal(res.statusCode, 401, res.body);
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'UNAUTHENTICATED');
  });

  test('DESIGN §13: the summary is the caller’s own; another user sees none of it', async () => {
    const owner = newUser('owner');
    await saveKey(t, owner, 'openai', llm('openai').validKey);
    await turn('openai', owner, {});
    const other = newUser('other');
    const res = await t.call('GET', '/api/advisor/usage?groupBy=provider', { user: other });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json<{ rows: Json[]; total: Json }>().rows, []);
    assert.equal(res.json<{ total: Json }>().total['turns'], 0);
  });

  for (const [query, why] of [
    ['from=2026-03-02&to=2026-03-01', 'from after to'],
    ['from=2025-01-01&to=2026-01-02', '367 days'],
    ['from=2025-02-30&to=2025-03-01', 'not a calendar date'],
    ['from=2025-2-1', 'not YYYY-MM-DD'],
    ['groupBy=week', 'unknown groupBy'],
    ['limit=5', 'unknown parameter'],
  ] as const) {
    test(`DESIGN §13: usage range ${why} → 400 VALIDATION_ERROR`, async () => {
      const res = await t.call('GET', `/api/advisor/usage?${query}`, { user: newUser('v') });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json<{ error: { code: string } }>().error.code, 'VALIDATION_ERROR');
    });
  }

  test('DESIGN §13: 366 days is the longest range', async () => {
    const res = await t.call('GET', '/api/advisor/usage?from=2024-01-01&to=2024-12-31', { user: newUser('v') });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json<{ rows: Json[] }>().rows.length, 366);
  });

  test('DESIGN §13: a turn’s end stored twice (a retry after a lost acknowledgement) is counted once', async () => {
    const user = newUser('retry');
    await saveKey(t, user, 'openai', llm('openai').validKey);
    const res = await turn('openai', user, {});
    const row = await t.deps.db
      .selectFrom('messages')
      .selectAll()
      .where('id', '=', String(startOf(res)['assistantMessageId']))
      .executeTakeFirstOrThrow();
    const again = {
      replyId: row.id,
      userId: user,
      provider: 'openai',
      model: 'gpt-4o-mini',
      now: new Date(),
      content: row.content,
      parts: null,
      status: 'complete',
      finishReason: 'stop',
      receipt: { input: 10, output: 2, cachedInput: 0, reasoning: 0, costMicros: 3 },
      error: undefined,
      lastFrameId: row.last_frame_id ?? 0,
    } as const;
    await closingStatement({ ...again, grounding: { figures: 0, matched: 0, unmatched: [], sources: [] } })(
      sql<ChargeRow>`select ''::text as source, 0::bigint as credits where false`,
    ).execute(t.deps.db);
    const body = (await t.call('GET', '/api/advisor/usage?groupBy=provider', { user })).json<{ total: Json }>();
    assert.equal(body.total['turns'], 1);
  });

  test('DESIGN §13: a provider that refuses the key during a turn (401) → PROVIDER_AUTH_FAILED, and the key is listed verified: false with when and why; a new save clears it', async () => {
    const user = newUser('rejected');
    await saveKey(t, user, 'openai', llm('openai').validKey);
    const before = Date.now();
    const res = await turn('openai', user, { status: 401 });
    assert.equal(res.frames.at(-1)?.event, 'error');
    assert.equal(res.frames.at(-1)?.data['code'], 'PROVIDER_AUTH_FAILED');
    const list = (await t.call('GET', '/api/advisor/provider-keys', { user })).json<{ items: Json[] }>().items;
    const key = list.find((k) => k['provider'] === 'openai');
    assert.equal(key?.['verified'], false);
    assert.equal(key?.['lastVerifiedAt'], null);
    assert.ok(Date.parse(String(key?.['rejectedAt'])) >= before - 1000, String(key?.['rejectedAt']));
    assert.equal(key?.['rejectedReason'], 'openai refused the key (HTTP 401) during an advisor turn');

    await saveKey(t, user, 'openai', llm('openai').validKey);
    const saved = (await t.call('GET', '/api/advisor/provider-keys', { user })).json<{ items: Json[] }>().items.find((k) => k['provider'] === 'openai');
    assert.deepEqual([saved?.['verified'], saved?.['rejectedAt'], saved?.['rejectedReason']], [true, null, null]);
  });

  test('DESIGN §13: a market-data key refused during a turn is listed with when and why', async () => {
    const user = newUser('market');
    await saveKey(t, user, 'openai', llm('openai').validKey);
    const put = await t.call('PUT', '/api/advisor/market-data-key', { user, body: { apiKey: fakes.polygon.validKey } });
    assert.equal(put.statusCode, 200, put.body);
    fakes.polygon.setMarket('unauthorized');
    try {
      await turn('openai', user, { toolCalls: [{ name: 'get_quote', arguments: { symbol: 'AAPL' } }] });
    } finally {
      fakes.polygon.setMarket('ok');
    }
    const status = (await t.call('GET', '/api/advisor/market-data-key', { user })).json<Json>();
    assert.equal(status['verified'], false);
    assert.equal(status['rejectedReason'], 'the market-data provider refused the key (HTTP 401) during an advisor turn');
    assert.equal(typeof status['rejectedAt'], 'string');
  });
});
