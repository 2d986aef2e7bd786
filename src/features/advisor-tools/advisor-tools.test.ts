// DESIGN §11 end to end: the advisor's tools through each wire protocol, the turn loop, the market
// reads on the user's own key, and what is stored and replayed. Real app, loopback provider fakes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { BUILT_IN_CATALOGUE, PROVIDERS, type Provider } from '../../catalogue.ts';
import type { MarketData } from '../../providers/market-data/index.ts';
import type { RecordedRequest, ScriptedCall, StreamScript } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { startKeyFakes, type KeyFakes } from '../../../test/kits/advisor-keys.ts';
import {
  message,
  newUser,
  openStream,
  replyRow,
  saveKey,
  send,
  startOf,
  textOf,
  waitFor,
  type Frame,
  type StreamResult,
} from '../../../test/kits/conversations.ts';

type Json = Record<string, unknown>;
const CANARY = `pk-CANARY-${randomUUID()}`;

/** Wraps the real market-data client to see how many reads run at once and with which signals. */
function watchMarketData(real: MarketData): MarketData & { inFlight: number; maxInFlight: number; signals: AbortSignal[] } {
  const watched = {
    ...real,
    inFlight: 0,
    maxInFlight: 0,
    signals: [] as AbortSignal[],
  };
  const wrap =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const signal = args.at(-1) as AbortSignal;
      watched.signals.push(signal);
      watched.inFlight++;
      watched.maxInFlight = Math.max(watched.maxInFlight, watched.inFlight);
      try {
        return await fn(...args);
      } finally {
        watched.inFlight--;
      }
    };
  watched.quote = wrap(real.quote);
  watched.priceHistory = wrap(real.priceHistory);
  watched.marketStatus = wrap(real.marketStatus);
  watched.searchSymbols = wrap(real.searchSymbols);
  return watched;
}

describe('advisor tools (DESIGN §11)', () => {
  let fakes: KeyFakes;
  let t: TestApp;
  let stalledReads: TestApp;
  let noTools: TestApp;
  let watched: ReturnType<typeof watchMarketData>;
  before(async () => {
    fakes = await startKeyFakes();
    fakes.polygon.addValidKey(CANARY);
    // No detach grace: a client that goes ends its turn at once (the grace has its own tests, DESIGN §12).
    // The longest read deadline: a read the fake answers never meets it, however busy the machine.
    t = await buildTestApp({
      env: fakes.env({ MARKET_DATA_TIMEOUT_MS: '120000', STREAM_DETACH_GRACE_MS: '0' }),
      deps: { marketData: (real) => (watched = watchMarketData(real)) },
    });
    // For the read the fake never answers: any deadline proves the rule, a short one keeps it quick.
    stalledReads = await buildTestApp({ env: fakes.env({ MARKET_DATA_TIMEOUT_MS: '200' }), shareWith: t });
    // A catalogue whose OpenAI models say `"tools": false`.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tools-catalogue-'));
    const file = path.join(dir, 'catalogue.json');
    const models = BUILT_IN_CATALOGUE.models.map((m) => (m.provider === 'openai' ? { ...m, tools: false } : m));
    writeFileSync(file, JSON.stringify({ ...BUILT_IN_CATALOGUE, models }));
    noTools = await buildTestApp({ env: fakes.env({ CONFIG_FILE: file }) });
  });
  after(async () => {
    await stalledReads.close();
    await t.close();
    await noTools.close();
    await fakes.close();
  });

  const llm = (p: Provider) => fakes.providers[p];

  /** A user with a key for `p` and (unless `market: false`) the canary market-data key. */
  async function user(p: Provider, opts: { market?: boolean; app?: TestApp } = {}): Promise<string> {
    const app = opts.app ?? t;
    const id = newUser(p);
    await saveKey(app, id, p, llm(p).validKey);
    if (opts.market !== false) {
      const res = await app.call('PUT', '/api/advisor/market-data-key', { user: id, body: { apiKey: CANARY } });
      assert.equal(res.statusCode, 200, res.body);
    }
    return id;
  }

  /** One turn with the rounds scripted in order; returns the stream and every upstream request it made. */
  async function turn(
    p: Provider,
    userId: string,
    rounds: StreamScript[],
    opts: { conversationId?: string | null; app?: TestApp; text?: string } = {},
  ): Promise<{ res: StreamResult; upstream: RecordedRequest[] }> {
    for (const r of rounds) llm(p).enqueueStream(r);
    const before = llm(p).streams.length;
    const res = await send(opts.app ?? t, userId, opts.conversationId ?? null, message(opts.text ?? 'Where is AAPL trading?'));
    assert.equal(res.statusCode, 200, res.body);
    return {
      res,
      upstream: llm(p)
        .streams.slice(before)
        .map((s) => s.request),
    };
  }

  const events = (r: StreamResult): string[] => r.frames.map((f) => f.event);
  const framesOf = (r: StreamResult, event: string): Json[] => r.frames.filter((f: Frame) => f.event === event).map((f) => f.data);
  const done = (r: StreamResult): Json => r.frames.at(-1)?.data ?? {};
  const quoteCall = (symbol = 'AAPL', extra: Partial<ScriptedCall> = {}): ScriptedCall => ({ name: 'get_quote', arguments: { symbol }, ...extra });

  /** The tool names a request offered, in the protocol's own form. */
  function offered(p: Provider, req: RecordedRequest): string[] {
    const body = req.json as Json;
    if (p === 'anthropic') return ((body['tools'] as Json[] | undefined) ?? []).map((x) => String(x['name']));
    if (p === 'google') {
      const decls = ((body['tools'] as Json[] | undefined) ?? []).flatMap((x) => (x['functionDeclarations'] as Json[] | undefined) ?? []);
      return decls.map((d) => String(d['name']));
    }
    return ((body['tools'] as Json[] | undefined) ?? []).map((x) => String((x['function'] as Json)['name']));
  }

  /** The tool results a request carried back to the model, as {id, name?, content} in the protocol's own form. */
  function returnedResults(p: Provider, req: RecordedRequest): { id: string | undefined; content: Json }[] {
    const body = req.json as Json;
    if (p === 'anthropic') {
      return (body['messages'] as Json[])
        .flatMap((m) => (Array.isArray(m['content']) ? (m['content'] as Json[]) : []))
        .filter((b) => b['type'] === 'tool_result')
        .map((b) => ({ id: String(b['tool_use_id']), content: JSON.parse(String(b['content'])) as Json }));
    }
    if (p === 'google') {
      return (body['contents'] as Json[])
        .flatMap((c) => c['parts'] as Json[])
        .filter((x) => x['functionResponse'] !== undefined)
        .map((x) => {
          const fr = x['functionResponse'] as Json;
          return { id: fr['id'] as string | undefined, content: fr['response'] as Json };
        });
    }
    return (body['messages'] as Json[])
      .filter((m) => m['role'] === 'tool')
      .map((m) => ({ id: String(m['tool_call_id']), content: JSON.parse(String(m['content'])) as Json }));
  }

  /** The tool calls a request carried back (the assistant's earlier calls), as {id, name}. */
  function returnedCalls(p: Provider, req: RecordedRequest): { id: string | undefined; name: string; args: Json }[] {
    const body = req.json as Json;
    if (p === 'anthropic') {
      return (body['messages'] as Json[])
        .flatMap((m) => (Array.isArray(m['content']) ? (m['content'] as Json[]) : []))
        .filter((b) => b['type'] === 'tool_use')
        .map((b) => ({ id: String(b['id']), name: String(b['name']), args: b['input'] as Json }));
    }
    if (p === 'google') {
      return (body['contents'] as Json[])
        .flatMap((c) => c['parts'] as Json[])
        .filter((x) => x['functionCall'] !== undefined)
        .map((x) => {
          const fc = x['functionCall'] as Json;
          return { id: fc['id'] as string | undefined, name: String(fc['name']), args: fc['args'] as Json };
        });
    }
    return (body['messages'] as Json[])
      .flatMap((m) => (m['tool_calls'] as Json[] | undefined) ?? [])
      .map((c) => {
        const fn = c['function'] as Json;
        return { id: String(c['id']), name: String(fn['name']), args: JSON.parse(String(fn['arguments'])) as Json };
      });
  }

  for (const p of PROVIDERS) {
    test(`DESIGN §11: ${p} quote round-trip: the call is assembled, run on the market key, its result reaches the model in ${p}'s own form, the model's text reaches the client`, async () => {
      const u = await user(p);
      const { res, upstream } = await turn(p, u, [{ toolCalls: [quoteCall('AAPL', { fragments: 4 })] }, { chunks: ['AAPL', ' looks fine'] }]);
      assert.deepEqual(events(res), ['start', 'tool_call', 'tool_result', 'delta', 'delta', 'done'], res.body);
      assert.deepEqual(
        res.frames.map((f) => f.id),
        [1, 2, 3, 4, 5, 6],
      );
      const [call] = framesOf(res, 'tool_call');
      const [result] = framesOf(res, 'tool_result');
      assert.deepEqual([call?.['name'], call?.['arguments']], ['get_quote', { symbol: 'AAPL' }]);
      assert.equal(result?.['id'], call?.['id']);
      assert.equal(result?.['ok'], true, JSON.stringify(result));
      const quote = result?.['result'] as Json;
      assert.equal(quote['symbol'], 'AAPL');
      assert.equal(typeof quote['price'], 'number');
      assert.equal(textOf(res), 'AAPL looks fine');
      assert.deepEqual([done(res)['finishReason'], done(res)['toolCalls']], ['stop', 1]);

      assert.equal(upstream.length, 2);
      assert.deepEqual(offered(p, upstream[0] as RecordedRequest).sort(), [
        'get_journal',
        'get_journal_report',
        'get_market_status',
        'get_price_history',
        'get_quote',
        'get_round_trips',
        'list_my_accounts',
        'list_trades',
        'position_size',
        'search_symbols',
      ]);
      const [back] = returnedResults(p, upstream[1] as RecordedRequest);
      assert.deepEqual(back?.content, quote, 'the model is sent exactly the result the client saw');
      const [echoed] = returnedCalls(p, upstream[1] as RecordedRequest);
      assert.deepEqual([echoed?.name, echoed?.args], ['get_quote', { symbol: 'AAPL' }]);
      if (p !== 'mistral') assert.equal(back?.id, echoed?.id ?? back?.id, 'the result answers the call it belongs to');
      if (p === 'google') {
        const modelTurn = ((upstream[1]?.json as Json)['contents'] as Json[]).find((c) => c['role'] === 'model');
        const part = (modelTurn?.['parts'] as Json[]).find((x) => x['functionCall'] !== undefined);
        assert.equal(part?.['thoughtSignature'], Buffer.from('sig:get_quote').toString('base64'), 'the thought signature travels back with the call');
      }
    });
  }

  test('DESIGN §11: the calls of one round run concurrently; results come back in call order', async () => {
    const u = await user('openai');
    watched.maxInFlight = 0;
    fakes.polygon.setLatency(150);
    try {
      const { res, upstream } = await turn('openai', u, [
        { toolCalls: [quoteCall('AAPL'), quoteCall('MSFT'), { name: 'get_market_status' }] },
        { chunks: ['Done'] },
      ]);
      assert.deepEqual(events(res), ['start', 'tool_call', 'tool_call', 'tool_call', 'tool_result', 'tool_result', 'tool_result', 'delta', 'done'], res.body);
      assert.equal(watched.maxInFlight, 3);
      const results = framesOf(res, 'tool_result');
      assert.deepEqual(
        results.map((r) => r['id']),
        framesOf(res, 'tool_call').map((c) => c['id']),
      );
      assert.deepEqual(
        returnedResults('openai', upstream[1] as RecordedRequest).map((r) => r.id),
        results.map((r) => r['id']),
      );
      assert.equal(done(res)['toolCalls'], 3);
    } finally {
      fakes.polygon.setLatency(0);
    }
  });

  test('DESIGN §11: at most ADVISOR_MAX_TOOL_CALLS (8) calls run; the rest are TOOL_CALL_LIMIT_REACHED; the last round has tools disabled', async () => {
    const u = await user('openai');
    const ten = ['AAPL', 'MSFT', 'NVDA', 'SPY', 'AAPL', 'MSFT', 'NVDA', 'SPY', 'AAPL', 'MSFT'].map((s) => quoteCall(s));
    const { res, upstream } = await turn('openai', u, [{ toolCalls: ten }, { chunks: ['Enough data'] }]);
    const results = framesOf(res, 'tool_result');
    assert.equal(results.length, 10);
    assert.deepEqual(
      results.map((r) => r['ok']),
      [true, true, true, true, true, true, true, true, false, false],
    );
    assert.deepEqual(
      results.slice(8).map((r) => (r['error'] as Json)['code']),
      ['TOOL_CALL_LIMIT_REACHED', 'TOOL_CALL_LIMIT_REACHED'],
    );
    assert.equal(done(res)['toolCalls'], 8);
    assert.equal(upstream.length, 2);
    assert.equal((upstream[1]?.json as Json)['tool_choice'], 'none');
    assert.equal(textOf(res), 'Enough data');
  });

  test('DESIGN §11: a model that keeps calling tools is stopped at the cap and the turn still ends with done', async () => {
    const u = await user('anthropic');
    // Nine rounds of calls: eight run, the ninth (told tool_choice none) calls anyway and is not run.
    const rounds = Array.from({ length: 9 }, () => ({ toolCalls: [{ name: 'get_market_status' }] }));
    const { res, upstream } = await turn('anthropic', u, rounds);
    assert.equal(res.frames.at(-1)?.event, 'done', res.body);
    assert.equal(done(res)['toolCalls'], 8);
    // Eight rounds with tools, then one with tool_choice none; its calls are not run.
    assert.equal(upstream.length, 9);
    assert.deepEqual((upstream[8]?.json as Json)['tool_choice'], { type: 'none' });
    assert.deepEqual((upstream[7]?.json as Json)['tool_choice'], { type: 'auto' });
    const results = framesOf(res, 'tool_result');
    assert.equal(results.filter((r) => r['ok'] === true).length, 8);
    assert.equal((results.at(-1)?.['error'] as Json)['code'], 'TOOL_CALL_LIMIT_REACHED');
  });

  const failures: [string, () => void, ScriptedCall, string, app?: () => TestApp][] = [
    ['arguments that are not JSON', () => undefined, { name: 'get_quote', raw: '{"symbol": "AAPL"' }, 'TOOL_INVALID_ARGUMENTS'],
    ['arguments outside the schema (symbol pattern)', () => undefined, quoteCall('$$$ bad'), 'TOOL_INVALID_ARGUMENTS'],
    [
      'an extra argument (additionalProperties: false)',
      () => undefined,
      { name: 'get_quote', arguments: { symbol: 'AAPL', venue: 'x' } },
      'TOOL_INVALID_ARGUMENTS',
    ],
    ['an unknown symbol', () => undefined, quoteCall('ZZZZZ'), 'UNKNOWN_SYMBOL'],
    ['a provider 429', () => fakes.polygon.setMarket('rate-limited'), quoteCall(), 'MARKET_DATA_RATE_LIMITED'],
    ['a provider 5xx', () => fakes.polygon.setMarket('server-error'), quoteCall(), 'MARKET_DATA_UNAVAILABLE'],
    [
      'a provider that does not answer within MARKET_DATA_TIMEOUT_MS',
      () => fakes.polygon.setMarket('stall'),
      quoteCall(),
      'MARKET_DATA_UNAVAILABLE',
      () => stalledReads,
    ],
    ['a plan not entitled to the data', () => fakes.polygon.setMarket('not-entitled'), quoteCall(), 'MARKET_DATA_NOT_ENTITLED'],
  ];
  for (const [what, arrange, call, code, appOf = () => t] of failures) {
    test(`DESIGN §11: ${what} → tool_result ${code}; the model is told and answers`, async () => {
      const app = appOf();
      const u = await user('openai', { app });
      arrange();
      try {
        const { res, upstream } = await turn('openai', u, [{ toolCalls: [call] }, { chunks: ['Sorry, no data'] }], { app });
        const [result] = framesOf(res, 'tool_result');
        assert.equal(result?.['ok'], false, JSON.stringify(result));
        assert.equal((result?.['error'] as Json)['code'], code);
        const [back] = returnedResults('openai', upstream[1] as RecordedRequest);
        assert.equal(((back?.content['error'] as Json | undefined) ?? {})['code'], code);
        assert.equal(res.frames.at(-1)?.event, 'done');
        assert.equal(textOf(res), 'Sorry, no data');
      } finally {
        fakes.polygon.setMarket('ok');
      }
    });
  }

  test('DESIGN §11: a market-data 401 during a turn → MARKET_DATA_KEY_INVALID and the stored key is marked verified: false', async () => {
    const u = await user('openai');
    const before = (await t.call('GET', '/api/advisor/market-data-key', { user: u })).json<Json>();
    assert.equal(before['verified'], true);
    fakes.polygon.setMarket('unauthorized');
    try {
      const { res } = await turn('openai', u, [{ toolCalls: [quoteCall()] }, { chunks: ['Your key was refused'] }]);
      assert.equal((framesOf(res, 'tool_result')[0]?.['error'] as Json)['code'], 'MARKET_DATA_KEY_INVALID');
    } finally {
      fakes.polygon.setMarket('ok');
    }
    const after = (await t.call('GET', '/api/advisor/market-data-key', { user: u })).json<Json>();
    assert.deepEqual([after['configured'], after['verified'], after['lastVerifiedAt']], [true, false, null]);
  });

  test('DESIGN §11: the market-data key is never sent to the model, in a frame, in a log line or in an error', async () => {
    const u = await user('openai');
    fakes.polygon.setMarket('unauthorized');
    let res: StreamResult;
    let upstream: RecordedRequest[];
    try {
      ({ res, upstream } = await turn('openai', u, [{ toolCalls: [quoteCall(), { name: 'search_symbols', arguments: { query: 'apple' } }] }, {}]));
    } finally {
      fakes.polygon.setMarket('ok');
    }
    const ok = await turn('openai', u, [
      { toolCalls: [quoteCall(), { name: 'get_price_history', arguments: { symbol: 'AAPL', interval: '1day', from: '2025-01-01', to: '2025-01-31' } }] },
      {},
    ]);
    const seenByModel = [...upstream, ...ok.upstream].map((r) => JSON.stringify(r.headers) + r.body).join('\n');
    assert.ok(!seenByModel.includes(CANARY), 'the model never sees the market-data key');
    assert.ok(!res.body.includes(CANARY) && !ok.res.body.includes(CANARY), 'no frame carries the key');
    assert.ok(!t.logs.join('').includes(CANARY), 'no log line carries the key');
    // It did reach the market-data provider, the way Polygon documents (a bearer token, not the URL).
    const marketReads = fakes.polygon.requests.filter((r) => r.path.startsWith('/v2/snapshot/'));
    assert.ok(marketReads.some((r) => r.headers['authorization'] === `Bearer ${CANARY}`));
    assert.ok(marketReads.every((r) => !JSON.stringify(r.query).includes(CANARY)));
  });

  test('DESIGN §11, §14: no market-data key → only list_my_accounts and the journal tools are offered', async () => {
    const u = await user('openai', { market: false });
    const { upstream } = await turn('openai', u, [{ chunks: ['Hi'] }]);
    assert.deepEqual(offered('openai', upstream[0] as RecordedRequest), [
      'list_my_accounts',
      'get_journal',
      'list_trades',
      'position_size',
      'get_round_trips',
      'get_journal_report',
    ]);
  });

  test('DESIGN §11: a catalogue model with "tools": false is offered no tool (no tools field at all)', async () => {
    const u = await user('openai', { app: noTools });
    const { res, upstream } = await turn('openai', u, [{ chunks: ['Plain answer'] }], { app: noTools });
    const body = upstream[0]?.json as Json;
    assert.equal(body['tools'], undefined);
    assert.equal(body['tool_choice'], undefined);
    assert.deepEqual(done(res)['toolCalls'], 0);
  });

  test('DESIGN §11: list_my_accounts reads the caller’s own accounts only', async () => {
    const u = await user('google');
    const other = newUser('other');
    for (const [owner, name] of [
      [u, 'Swing IBKR'],
      [other, 'Not yours'],
    ] as const) {
      const res = await t.call('POST', '/api/accounts', {
        user: owner,
        body: { name, currency: 'USD', timezone: 'America/New_York', startingBalance: '25000.00' },
      });
      assert.equal(res.statusCode, 201, res.body);
    }
    const { res } = await turn('google', u, [{ toolCalls: [{ name: 'list_my_accounts' }] }, { chunks: ['You have one account'] }]);
    const result = framesOf(res, 'tool_result')[0]?.['result'] as Json;
    assert.deepEqual(result['accounts'], [{ name: 'Swing IBKR', currency: 'USD', timezone: 'America/New_York', brokerage: null, startingBalance: '25000.00' }]);
  });

  for (const p of ['openai', 'anthropic', 'google', 'mistral'] as const) {
    test(`DESIGN §11: ${p} follow-up turn carries the earlier calls and results in ${p}'s own form; GET shows them as parts`, async () => {
      const u = await user(p);
      const first = await turn(p, u, [{ toolCalls: [quoteCall('NVDA')] }, { chunks: ['NVDA is up'] }]);
      const conversationId = String(startOf(first.res)['conversationId']);
      const second = await turn(p, u, [{ chunks: ['As I said'] }], { conversationId, text: 'And now?' });
      assert.equal(second.res.frames.at(-1)?.event, 'done', second.res.body);
      const req = second.upstream[0] as RecordedRequest;
      assert.deepEqual(
        returnedCalls(p, req).map((c) => [c.name, c.args]),
        [['get_quote', { symbol: 'NVDA' }]],
      );
      const [result] = returnedResults(p, req);
      assert.equal(result?.content['symbol'], 'NVDA');

      const conv = (await t.call('GET', `/api/advisor/conversations/${conversationId}`, { user: u })).json<{ messages: Json[] }>();
      const reply = conv.messages.find((m) => m['role'] === 'assistant');
      const parts = reply?.['parts'] as Json[];
      assert.deepEqual(
        parts.map((x) => x['type']),
        ['tool_call', 'tool_result', 'text'],
      );
      assert.deepEqual([parts[0]?.['name'], parts[0]?.['arguments']], ['get_quote', { symbol: 'NVDA' }]);
      assert.equal(parts[1]?.['ok'], true);
      assert.equal(parts[2]?.['text'], 'NVDA is up');
      assert.equal(reply?.['text'], 'NVDA is up');
    });
  }

  test('DESIGN §11: a multi-round turn is charged once', async () => {
    const u = await user('openai');
    const { res } = await turn('openai', u, [
      { toolCalls: [quoteCall()] },
      { toolCalls: [{ name: 'get_market_status' }] },
      { chunks: ['Two rounds of tools'] },
    ]);
    assert.equal(done(res)['toolCalls'], 2);
    const charges = await sql<{ n: string | number }>`select count(*) as n from turn_charges where user_id = ${u}`.execute(t.deps.db);
    assert.equal(Number(charges.rows[0]?.n), 1);
    const usage = await sql<{ n: string | number }>`select coalesce(sum(allowance_turns), 0) as n from monthly_usage where user_id = ${u}`.execute(t.deps.db);
    assert.equal(Number(usage.rows[0]?.n), 1);
  });

  test('DESIGN §11 with STREAM_DETACH_GRACE_MS=0: a client that goes away during a tool call ends the tool call too; the reply is stored interrupted with the call', async () => {
    const u = await user('openai');
    fakes.polygon.setMarket('stall');
    llm('openai').enqueueStream({ toolCalls: [quoteCall()] });
    const before = watched.signals.length;
    const stream = openStream(await listening(t), await t.token(u), message());
    try {
      await waitFor('the tool call to start', () => (watched.signals.length > before ? true : undefined));
      const signal = watched.signals[before] as AbortSignal;
      assert.equal(signal.aborted, false);
      stream.destroy();
      await waitFor('the tool call to be aborted', () => (signal.aborted ? true : undefined));
      assert.notEqual((signal.reason as Error | undefined)?.name, 'TimeoutError', 'ended by the client, not by the deadline');
      const replyId = String(stream.frames[0]?.data['assistantMessageId']);
      const row = await waitFor('the reply to settle', async () => {
        const r = await replyRow(t, replyId);
        return r?.status === 'streaming' ? undefined : r;
      });
      assert.equal(row.status, 'interrupted');
      assert.deepEqual(
        (row.parts as Json[]).map((x) => x['type']),
        ['tool_call'],
      );
    } finally {
      fakes.polygon.setMarket('ok');
    }
  });
});

/** The app's base URL on a real socket (the stream must be cut by a real client). */
async function listening(t: TestApp): Promise<string> {
  const address = t.app.server.address();
  if (address !== null && typeof address === 'object') return `http://127.0.0.1:${address.port}`;
  return t.app.listen({ host: '127.0.0.1', port: 0 });
}
