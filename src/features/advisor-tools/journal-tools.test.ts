// DESIGN §14 (advisor tools) with §11's rules: get_journal, list_trades and position_size through each
// wire protocol, offered always, their arguments checked, accounts named in words, results capped.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Provider } from '../../catalogue.ts';
import type { RecordedRequest, ScriptedCall, StreamScript } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { startKeyFakes, type KeyFakes } from '../../../test/kits/advisor-keys.ts';
import { message, newUser, saveKey, send, textOf, type StreamResult } from '../../../test/kits/conversations.ts';
import { MAX_RESULT_BYTES } from './cap.ts';
import { decimalOf } from './journal-tools.ts';

type Json = Record<string, unknown>;

describe('journal tools (DESIGN §14, §11)', () => {
  let fakes: KeyFakes;
  let t: TestApp;
  const clock = new ManualClock(new Date('2026-03-20T15:00:00Z'));
  before(async () => {
    fakes = await startKeyFakes();
    t = await buildTestApp({ env: fakes.env({ STREAM_DETACH_GRACE_MS: '0' }), clock });
  });
  after(async () => {
    await t.close();
    await fakes.close();
  });

  const llm = (p: Provider) => fakes.providers[p];

  async function user(p: Provider): Promise<string> {
    const id = newUser(p);
    await saveKey(t, id, p, llm(p).validKey);
    return id;
  }
  async function account(u: string, name: string, startingBalance = '25000'): Promise<string> {
    const res = await t.call('POST', '/api/accounts', { user: u, body: { name, currency: 'USD', timezone: 'America/New_York', startingBalance } });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<{ id: string }>().id;
  }
  async function fill(u: string, accountId: string, body: Json): Promise<void> {
    const res = await t.call('POST', `/api/accounts/${accountId}/trades`, {
      user: u,
      body: { symbol: 'AAPL', quantity: '10', executedAt: '2026-03-16T15:00:00Z', ...body },
    });
    assert.equal(res.statusCode, 201, res.body);
  }
  async function turn(p: Provider, u: string, rounds: StreamScript[]): Promise<{ res: StreamResult; upstream: RecordedRequest[] }> {
    for (const r of rounds) llm(p).enqueueStream(r);
    const before = llm(p).streams.length;
    const res = await send(t, u, null, message('How did my week go?'));
    assert.equal(res.statusCode, 200, res.body);
    return {
      res,
      upstream: llm(p)
        .streams.slice(before)
        .map((s) => s.request),
    };
  }
  const results = (r: StreamResult): Json[] => r.frames.filter((f) => f.event === 'tool_result').map((f) => f.data);
  const only = (r: StreamResult): Json => results(r)[0] ?? assert.fail(r.body);
  const call = (name: string, args: Json): ScriptedCall => ({ name, arguments: args });

  function offered(p: Provider, req: RecordedRequest): string[] {
    const body = req.json as Json;
    if (p === 'anthropic') return ((body['tools'] as Json[] | undefined) ?? []).map((x) => String(x['name']));
    if (p === 'google')
      return ((body['tools'] as Json[] | undefined) ?? []).flatMap((x) => (x['functionDeclarations'] as Json[]).map((d) => String(d['name'])));
    return ((body['tools'] as Json[] | undefined) ?? []).map((x) => String((x['function'] as Json)['name']));
  }
  function systemText(p: Provider, req: RecordedRequest): string {
    const body = req.json as Json;
    if (p === 'anthropic') return JSON.stringify(body['system']);
    if (p === 'google') return JSON.stringify(body['systemInstruction']);
    return JSON.stringify((body['messages'] as Json[]).find((m) => m['role'] === 'system'));
  }
  function returned(p: Provider, req: RecordedRequest): Json | undefined {
    const body = req.json as Json;
    if (p === 'anthropic') {
      const block = (body['messages'] as Json[])
        .flatMap((m) => (Array.isArray(m['content']) ? (m['content'] as Json[]) : []))
        .find((b) => b['type'] === 'tool_result');
      return block ? (JSON.parse(String(block['content'])) as Json) : undefined;
    }
    if (p === 'google') {
      const part = (body['contents'] as Json[]).flatMap((c) => c['parts'] as Json[]).find((x) => x['functionResponse'] !== undefined);
      return (part?.['functionResponse'] as Json | undefined)?.['response'] as Json | undefined;
    }
    const m = (body['messages'] as Json[]).find((x) => x['role'] === 'tool');
    return m ? (JSON.parse(String(m['content'])) as Json) : undefined;
  }

  for (const p of ['openai', 'anthropic', 'google'] as const) {
    test(`DESIGN 14: ${p}: the journal tools are offered without a market-data key; get_journal (account left out: one account) reaches the model in ${p}'s own form; the system prompt sends every figure of the trader's history to the tools`, async () => {
      const u = await user(p);
      const a = await account(u, 'Swing');
      await fill(u, a, { side: 'buy', price: '100', fee: '1' });
      await fill(u, a, { side: 'sell', price: '110', fee: '1', executedAt: '2026-03-17T15:00:00Z' });
      await fill(u, a, { side: 'buy', quantity: '5', price: '120', executedAt: '2026-03-18T15:00:00Z' });
      const { res, upstream } = await turn(p, u, [
        { toolCalls: [call('get_journal', { from: '2026-03-01', to: '2026-03-20' })] },
        { chunks: ['Your week: +98'] },
      ]);
      assert.deepEqual(offered(p, upstream[0] as RecordedRequest).sort(), [
        'get_journal',
        'get_journal_report',
        'get_round_trips',
        'list_my_accounts',
        'list_trades',
        'position_size',
      ]);
      assert.match(systemText(p, upstream[0] as RecordedRequest), /never from memory or arithmetic of your own/);
      const r = only(res);
      assert.equal(r['ok'], true, JSON.stringify(r));
      const result = r['result'] as Json;
      assert.deepEqual(result['account'], { name: 'Swing', id: a, currency: 'USD' });
      assert.deepEqual((result['totals'] as Json)['netPnl'], '98');
      assert.deepEqual((result['totals'] as Json)['roundTrips'], 1);
      assert.deepEqual(result['openPositions'], [{ symbol: 'AAPL', quantity: '5', averagePrice: '120', openedAt: '2026-03-18T15:00:00.000Z' }]);
      assert.equal(result['balance'], '25098');
      assert.deepEqual(returned(p, upstream[1] as RecordedRequest), result, 'the model is sent exactly the result the client saw');
      assert.equal(textOf(res), 'Your week: +98');
      assert.equal(res.frames.at(-1)?.event, 'done');
    });
  }

  test('DESIGN 14 + §17: list_trades by account name, symbol and limit: newest first, each with its asset class, multiplier and stop', async () => {
    const u = await user('openai');
    await account(u, 'Other');
    const a = await account(u, 'Futures IBKR');
    for (let i = 0; i < 4; i++) await fill(u, a, { symbol: i % 2 ? 'MSFT' : 'AAPL', side: 'buy', price: `${100 + i}`, executedAt: `2026-03-1${i}T15:00:00Z` });
    const { res } = await turn('openai', u, [
      { toolCalls: [call('list_trades', { account: 'futures ibkr', from: '2026-03-01', to: '2026-03-20', symbol: 'aapl', limit: 1 })] },
      { chunks: ['ok'] },
    ]);
    const result = only(res)['result'] as Json;
    assert.deepEqual(result['trades'], [
      {
        symbol: 'AAPL',
        side: 'buy',
        quantity: '10',
        price: '102',
        fee: '0',
        assetClass: 'stock',
        multiplier: '1',
        stopPrice: null,
        executedAt: '2026-03-12T15:00:00.000Z',
        tradingDay: '2026-03-12',
        note: null,
        tags: [],
      },
    ]);
    assert.equal(result['more'], true);
  });

  for (const p of ['openai', 'anthropic', 'google'] as const) {
    test(`DESIGN 17: ${p}: get_round_trips and get_journal_report (by weekday, the what-if without Fridays) reach the model in ${p}'s own form with exact figures`, async () => {
      const u = await user(p);
      const a = await account(u, 'Futures');
      // Thu: one ES contract long 8.25 points (×50) with a stop 2 points away (risk 100); Fri: a loser.
      await fill(u, a, {
        symbol: 'ESM6',
        assetClass: 'future',
        quantity: '1',
        side: 'buy',
        price: '5000',
        stopPrice: '4998',
        executedAt: '2026-03-12T14:00:00Z',
      });
      await fill(u, a, { symbol: 'ESM6', assetClass: 'future', quantity: '1', side: 'sell', price: '5008.25', fee: '2.5', executedAt: '2026-03-12T15:00:00Z' });
      await fill(u, a, { symbol: 'AAPL', quantity: '10', side: 'buy', price: '100', tags: ['revenge'], executedAt: '2026-03-13T15:00:00Z' });
      await fill(u, a, { symbol: 'AAPL', quantity: '10', side: 'sell', price: '97', executedAt: '2026-03-13T15:30:00Z' });
      const { res, upstream } = await turn(p, u, [
        {
          toolCalls: [
            call('get_round_trips', { from: '2026-03-01', to: '2026-03-20' }),
            call('get_journal_report', { from: '2026-03-01', to: '2026-03-20', by: 'weekday' }),
            call('get_journal_report', { from: '2026-03-01', to: '2026-03-20', by: 'symbol', exclude: ['weekday:fri'] }),
          ],
        },
        { chunks: ['Fridays cost you 30.'] },
      ]);
      const [trips, byWeekday, whatIf] = results(res).map((r) => r['result'] as Json);
      const list = trips?.['roundTrips'] as Json[];
      assert.deepEqual(
        list.map((x) => [x['symbol'], x['side'], x['netPnl'], x['initialRisk'], x['rMultiple'], x['id']]),
        [
          ['AAPL', 'long', '-30', null, null, undefined],
          ['ESM6', 'long', '410', '100', '4.1', undefined],
        ],
      );
      assert.deepEqual(
        (byWeekday?.['groups'] as { key: string; totals: Json }[]).map((g) => [g.key, g.totals['netPnl']]),
        [
          ['thu', '410'],
          ['fri', '-30'],
        ],
      );
      assert.deepEqual(
        [whatIf?.['exclude'], (whatIf?.['totals'] as Json)['netPnl'], (whatIf?.['totals'] as Json)['averageR']],
        [['weekday:fri'], '410', '4.1'],
      );
      assert.deepEqual(returned(p, upstream[1] as RecordedRequest), trips, `the model is sent exactly the result the client saw (${p})`);
      assert.match(systemText(p, upstream[0] as RecordedRequest), /get_journal_report/);
      assert.equal(textOf(res), 'Fridays cost you 30.');
    });
  }

  test('DESIGN 17: position_size sizes a future at its multiplier and says when the position is worth more than the balance (exceedsBalance)', async () => {
    const u = await user('openai');
    await account(u, 'Small', '100');
    const { res } = await turn('openai', u, [
      {
        toolCalls: [
          call('position_size', { entry: 0.01, stop: 0.009, riskPercent: 100 }),
          call('position_size', { symbol: 'MESZ5', entry: 5000, stop: 4990, riskPercent: 2, balance: 25000 }),
          call('position_size', { entry: 5000, stop: 4990, riskPercent: 2, balance: 25000, multiplier: 50 }),
        ],
      },
      { chunks: ['ok'] },
    ]);
    const [penny, micro, full] = results(res).map((r) => r['result'] as Json);
    // 100 / 0.001 = 100,000 shares at 0.01 = 1,000 of position on a balance of 100: said, not silent.
    assert.deepEqual([penny?.['shares'], penny?.['positionValue'], penny?.['exceedsBalance']], ['100000', '1000', true]);
    // Risk 500; MES: 10 points × 5 = 50 a contract → 10 contracts worth 10 × 5000 × 5 = 250,000.
    assert.deepEqual([micro?.['shares'], micro?.['multiplier'], micro?.['positionValue'], micro?.['exceedsBalance']], ['10', '5', '250000', true]);
    // ES: 10 × 50 = 500 a contract → 1 contract.
    assert.deepEqual([full?.['shares'], full?.['multiplier'], full?.['positionValue']], ['1', '50', '250000']);
  });

  test('DESIGN 14: position_size is exact: balance from the journal when not given; given, no account is needed', async () => {
    const u = await user('anthropic');
    const a = await account(u, 'Main', '10000.10');
    await fill(u, a, { side: 'buy', price: '100' });
    await fill(u, a, { side: 'sell', price: '99.9', fee: '0.1', executedAt: '2026-03-17T15:00:00Z' });
    await account(u, 'Second');
    const { res } = await turn('anthropic', u, [
      {
        toolCalls: [
          call('position_size', { account: 'Main', entry: 187.5, stop: 182.25, riskPercent: 1 }),
          call('position_size', { entry: 0.3, stop: 0.1, riskPercent: 0.7, balance: 1000 }),
        ],
      },
      { chunks: ['ok'] },
    ]);
    const [fromJournal, given] = results(res).map((r) => r['result'] as Json);
    // Balance 10000.10 − 1 (realized) − 0.1 (fee) = 9999; risk 1 % = 99.99; 99.99 / 5.25 = 19.04… → 19 shares.
    assert.deepEqual(fromJournal, {
      shares: '19',
      riskAmount: '99.99',
      perShareRisk: '5.25',
      multiplier: '1',
      positionValue: '3562.5',
      balance: '9999',
      exceedsBalance: false,
      account: { name: 'Main', id: a, currency: 'USD' },
    });
    // 0.3 − 0.1 is 0.19999999999999998 in binary floating point; exactly, 7 / 0.2 = 35.
    assert.deepEqual(given, {
      shares: '35',
      riskAmount: '7',
      perShareRisk: '0.2',
      multiplier: '1',
      positionValue: '10.5',
      balance: '1000',
      exceedsBalance: false,
    });
  });

  test('DESIGN 14: an unknown account → ACCOUNT_NOT_FOUND listing the user’s accounts; an ambiguous name or none of several → ACCOUNT_AMBIGUOUS listing the candidates; the model answers', async () => {
    const u = await user('google');
    await account(u, 'Swing IBKR');
    await account(u, 'Swing Tasty');
    await account(u, 'Long term');
    const { res } = await turn('google', u, [
      {
        toolCalls: [
          call('get_journal', { account: 'Crypto', from: '2026-03-01', to: '2026-03-20' }),
          call('get_journal', { account: 'swing', from: '2026-03-01', to: '2026-03-20' }),
          call('list_trades', { from: '2026-03-01', to: '2026-03-20' }),
          call('get_journal', { account: 'long TERM', from: '2026-03-01', to: '2026-03-20' }),
        ],
      },
      { chunks: ['Which account?'] },
    ]);
    const [unknown, ambiguous, none, exact] = results(res);
    assert.deepEqual([unknown?.['ok'], (unknown?.['error'] as Json)['code']], [false, 'ACCOUNT_NOT_FOUND']);
    assert.match(String((unknown?.['error'] as Json)['message']), /"Swing IBKR".*"Swing Tasty".*"Long term"/);
    assert.deepEqual((ambiguous?.['error'] as Json)['code'], 'ACCOUNT_AMBIGUOUS');
    const candidates = String((ambiguous?.['error'] as Json)['message']);
    assert.ok(candidates.includes('"Swing IBKR"') && candidates.includes('"Swing Tasty"') && !candidates.includes('Long term'), candidates);
    assert.deepEqual((none?.['error'] as Json)['code'], 'ACCOUNT_AMBIGUOUS');
    assert.equal(exact?.['ok'], true);
    assert.equal(res.frames.at(-1)?.event, 'done');
    assert.equal(textOf(res), 'Which account?');
  });

  test('DESIGN 14 + §11: bad arguments → TOOL_INVALID_ARGUMENTS (schema, calendar, range, stop = entry); a user with no account → ACCOUNT_NOT_FOUND', async () => {
    const u = await user('openai');
    const noAccount = await turn('openai', u, [{ toolCalls: [call('get_journal', { from: '2026-03-01', to: '2026-03-20' })] }, { chunks: ['none'] }]);
    assert.equal((only(noAccount.res)['error'] as Json)['code'], 'ACCOUNT_NOT_FOUND');
    await account(u, 'Only');
    const bad: ScriptedCall[] = [
      call('get_journal', { from: '2026-03-01', to: '2026-03-20', extra: true }),
      call('get_journal', { from: '2026-02-30', to: '2026-03-20' }),
      call('get_journal', { from: '2026-03-21', to: '2026-03-20' }),
      call('get_journal', { from: '2020-01-01', to: '2026-03-20' }),
      call('list_trades', { from: '2026-03-01', to: '2026-03-20', limit: 101 }),
      call('position_size', { entry: 10, stop: 9, riskPercent: 0 }),
      call('position_size', { entry: 10, stop: 9, riskPercent: 100.5 }),
      call('position_size', { entry: 10, stop: 10, riskPercent: 1 }),
    ];
    const { res } = await turn('openai', u, [{ toolCalls: bad }, { chunks: ['Let me fix that'] }]);
    assert.deepEqual(
      results(res).map((r) => (r['error'] as Json | undefined)?.['code']),
      Array<string>(bad.length).fill('TOOL_INVALID_ARGUMENTS'),
    );
    assert.equal(res.frames.at(-1)?.event, 'done');
  });

  test('DESIGN 14 + §11: a result is capped at 16 KB of JSON (list_trades of long notes keeps its newest, truncated: true)', async () => {
    const u = await user('openai');
    const a = await account(u, 'Notes');
    for (let i = 0; i < 12; i++)
      await fill(u, a, { side: 'buy', price: '1', note: `${i}`.padEnd(2000, '.'), executedAt: `2026-03-1${i % 10}T1${Math.floor(i / 10)}:00:00Z` });
    const { res } = await turn('openai', u, [{ toolCalls: [call('list_trades', { from: '2026-03-01', to: '2026-03-20', limit: 100 })] }, { chunks: ['ok'] }]);
    const result = only(res)['result'] as Json;
    assert.equal(result['truncated'], true);
    assert.ok(Buffer.byteLength(JSON.stringify(result)) <= MAX_RESULT_BYTES);
    const trades = result['trades'] as Json[];
    assert.ok(trades.length >= 5 && trades.length < 12, String(trades.length));
    assert.equal(trades[0]?.['executedAt'], '2026-03-19T10:00:00.000Z', 'the newest trades are kept');
  });

  test('DESIGN 14: a number the model sends is read as the decimal it wrote', () => {
    assert.deepEqual([0.1, 187.5, 1e-7, 1.5e21, 100].map(decimalOf), [
      { units: 1n, places: 1 },
      { units: 1875n, places: 1 },
      { units: 1n, places: 7 },
      { units: 1500000000000000000000n, places: 0 },
      { units: 100n, places: 0 },
    ]);
  });
});
