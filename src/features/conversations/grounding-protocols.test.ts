// DESIGN §18 end to end through each wire protocol: the figures of a reply checked against the turn's
// tool results (get_quote, get_journal, position_size) and the user's message, in `done`, the stored
// reply, the conversation's messages and a resume's snapshot; for complete, stopped and failed turns.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { Provider } from '../../catalogue.ts';
import type { RecordedRequest, ScriptedCall, StreamScript } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { startKeyFakes, type KeyFakes } from '../../../test/kits/advisor-keys.ts';
import { attachStream, message, newUser, openStream, replyRow, saveKey, send, startOf, textOf, type Frame } from '../../../test/kits/conversations.ts';

type Json = Record<string, unknown>;
interface Span {
  text: string;
  start: number;
  end: number;
  toolCallId?: string | null;
}
interface GroundingJson {
  figures: number;
  matched: number;
  unmatched: Span[];
  sources: Span[];
}

/** At least the frame log's shortest retention: a resume after it gets the stored reply as a snapshot. */
const RETENTION_MS = 1000;
const CANARY = 'pk-grounding-canary';

describe('grounding through each wire protocol (DESIGN §18)', () => {
  let fakes: KeyFakes;
  let t: TestApp;
  let base: string;
  before(async () => {
    fakes = await startKeyFakes();
    fakes.polygon.addValidKey(CANARY);
    t = await buildTestApp({ env: fakes.env({ STREAM_DETACH_GRACE_MS: '0', STREAM_LOG_RETENTION_MS: String(RETENTION_MS) }) });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await t.close();
    await fakes.close();
  });

  const llm = (p: Provider) => fakes.providers[p];
  const call = (id: string, name: string, args: Json): ScriptedCall => ({ id, name, arguments: args });

  /** A user with a key for `p`, the market-data key, and an account whose week is: +98 net, 5 AAPL held at 120. */
  async function trader(p: Provider): Promise<string> {
    const u = newUser(p);
    await saveKey(t, u, p, llm(p).validKey);
    const key = await t.call('PUT', '/api/advisor/market-data-key', { user: u, body: { apiKey: CANARY } });
    assert.equal(key.statusCode, 200, key.body);
    const res = await t.call('POST', '/api/accounts', {
      user: u,
      body: { name: 'Swing', currency: 'USD', timezone: 'America/New_York', startingBalance: '25000' },
    });
    assert.equal(res.statusCode, 201, res.body);
    const accountId = res.json<{ id: string }>().id;
    for (const fill of [
      { side: 'buy', price: '100', fee: '1', executedAt: '2026-03-16T15:00:00Z' },
      { side: 'sell', price: '110', fee: '1', executedAt: '2026-03-17T15:00:00Z' },
      { side: 'buy', quantity: '5', price: '120', executedAt: '2026-03-18T15:00:00Z' },
    ]) {
      const r = await t.call('POST', `/api/accounts/${accountId}/trades`, { user: u, body: { symbol: 'AAPL', quantity: '10', ...fill } });
      assert.equal(r.statusCode, 201, r.body);
    }
    return u;
  }

  const grounding = (data: Json | undefined): GroundingJson => (data?.['grounding'] as GroundingJson | undefined) ?? assert.fail('no grounding');
  const TOOLS = [
    call('call_quote', 'get_quote', { symbol: 'AAPL' }),
    call('call_journal', 'get_journal', { from: '2026-03-01', to: '2026-03-20' }),
    call('call_size', 'position_size', { entry: 232.8, stop: 230.3, riskPercent: 1 }),
  ];

  /** The reply as the stream, the stored row, the conversation's messages and (after the log's retention) a resume's snapshot show it. */
  async function everywhere(u: string, conversationId: string, replyId: string): Promise<{ row: GroundingJson | null; api: unknown; snapshot: Json }> {
    const row = (await replyRow(t, replyId))?.grounding as GroundingJson | null;
    const conv = await t.call('GET', `/api/advisor/conversations/${conversationId}`, { user: u });
    assert.equal(conv.statusCode, 200, conv.body);
    const api = conv.json<{ messages: Json[] }>().messages.find((m) => m['id'] === replyId)?.['grounding'];
    await delay(RETENTION_MS + 300);
    const resumed = attachStream(base, await t.token(u), conversationId, 1);
    await resumed.ended;
    const snapshot = resumed.frames.find((f: Frame) => f.event === 'snapshot')?.data ?? assert.fail(JSON.stringify(resumed.frames));
    return { row, api, snapshot };
  }

  /** The figures a grounding names, as [text, the tool's name or null for the user's message]. */
  function named(g: GroundingJson, content: string, calls: Frame[]): [string, string | null][] {
    const toolOf = new Map(calls.map((c) => [String(c.data['id']), String(c.data['name'])]));
    for (const s of [...g.sources, ...g.unmatched]) assert.equal(content.slice(s.start, s.end), s.text, 'offsets name the figure in the content');
    return g.sources.map((s) => [s.text, s.toolCallId == null ? null : (toolOf.get(s.toolCallId) ?? `unknown id ${s.toolCallId}`)]);
  }

  /** The system prompt of a request, in the protocol's own place. */
  function systemText(p: Provider, req: RecordedRequest | undefined): string {
    const body = (req?.json ?? {}) as Json;
    if (p === 'anthropic') return JSON.stringify(body['system']);
    if (p === 'google') return JSON.stringify(body['systemInstruction']);
    return JSON.stringify((body['messages'] as Json[] | undefined)?.find((m) => m['role'] === 'system'));
  }

  const QUOTING =
    'AAPL trades at $232.80, up 0.98 (0.42%) on 44.5M shares. Your week: net +$98, a 100% win rate, fees of $2; you hold 5 AAPL at $120 ' +
    'and your balance is $25,098. Risking 1% ($250.98, about $251) with your stop at 230.3 ($2.50 a share) means 100 shares, $23,280 of position.';

  for (const p of ['openai', 'anthropic', 'google'] as const) {
    describe(p, () => {
      test(`DESIGN §18: ${p}: a reply quoting get_quote, get_journal and position_size figures exactly, rounded and as percentages has every figure matched to its tool call; done, the stored reply, the messages API and a resume's snapshot carry the same grounding`, async () => {
        const u = await trader(p);
        for (const r of [{ toolCalls: TOOLS }, { chunks: [QUOTING.slice(0, 100), QUOTING.slice(100)] }] as StreamScript[]) llm(p).enqueueStream(r);
        const before = llm(p).streams.length;
        const body = message('Size a 1% risk on AAPL with a stop at 230.3');
        const res = await send(t, u, null, body);
        assert.match(systemText(p, llm(p).streams[before]?.request), /Quote figures from tool results as given/);
        assert.equal(res.frames.at(-1)?.event, 'done', res.body);
        const done = res.frames.at(-1)?.data;
        const g = grounding(done);
        const calls = res.frames.filter((f) => f.event === 'tool_call');
        assert.equal(calls.length, 3);
        assert.equal(textOf(res), QUOTING);
        assert.deepEqual([g.figures, g.matched, g.unmatched], [17, 17, []]);
        assert.deepEqual(named(g, QUOTING, calls), [
          ['$232.80', 'get_quote'],
          ['0.98', 'get_quote'],
          ['0.42%', 'get_quote'],
          ['44.5M', 'get_quote'],
          ['+$98', 'get_journal'],
          ['100%', 'get_journal'],
          ['$2', 'get_journal'],
          ['5', 'get_journal'],
          ['$120', 'get_journal'],
          ['$25,098', 'get_journal'],
          // 0.98 rounds to 1: the first tool call holding a value is its source.
          ['1%', 'get_quote'],
          ['$250.98', 'position_size'],
          ['$251', 'position_size'],
          ['230.3', null],
          ['$2.50', 'position_size'],
          ['100', 'get_journal'],
          ['$23,280', 'position_size'],
        ]);
        const start = startOf(res);
        const { row, api, snapshot } = await everywhere(u, String(start['conversationId']), String(start['assistantMessageId']));
        assert.deepEqual(row, g);
        assert.deepEqual(api, g);
        assert.deepEqual([snapshot['status'], snapshot['grounding']], ['complete', g]);
        // DESIGN §12: a terminal frame rebuilt from the stored reply (here a retry's replay; a late attach
        // once the log is gone) is the one the turn sent, byte for byte (jsonb keeps keys in an order of its own).
        const replay = await send(t, u, null, body);
        assert.equal(JSON.stringify(replay.frames.at(-1)?.data), JSON.stringify(done));
      });

      test(`DESIGN §18: ${p}: an invented price is flagged in unmatched with its offsets; the quoted ones are not`, async () => {
        const u = await trader(p);
        const reply = 'AAPL is at $232.80; resistance sits at $241.50, then 0.42% higher.';
        for (const r of [{ toolCalls: [TOOLS[0]] }, { chunks: [reply] }] as StreamScript[]) llm(p).enqueueStream(r);
        const res = await send(t, u, null, message('Where is AAPL?'));
        const g = grounding(res.frames.at(-1)?.data);
        const at = reply.indexOf('$241.50');
        assert.deepEqual([g.figures, g.matched, g.unmatched], [3, 2, [{ text: '$241.50', start: at, end: at + 7 }]]);
        assert.deepEqual(
          named(
            g,
            reply,
            res.frames.filter((f) => f.event === 'tool_call'),
          ),
          [
            ['$232.80', 'get_quote'],
            ['0.42%', 'get_quote'],
          ],
        );
        assert.deepEqual((await replyRow(t, String(startOf(res)['assistantMessageId'])))?.grounding, g);
      });

      test(`DESIGN §18: ${p}: a reply with no tool call has its figures matched against the user's message only`, async () => {
        const u = await trader(p);
        const reply = 'Your 200 shares bought at $45.10 are worth 47.30 each now; the 50-day average is near 46.2.';
        llm(p).enqueueStream({ chunks: [reply] });
        const res = await send(t, u, null, message('I bought 200 shares at $45.10 on Mar 3, 2026 and it is now 47.3'));
        assert.deepEqual(
          res.frames.map((f) => f.event),
          ['start', 'delta', 'done'],
        );
        const g = grounding(res.frames.at(-1)?.data);
        const at = reply.indexOf('46.2');
        assert.deepEqual([g.figures, g.matched, g.unmatched], [4, 3, [{ text: '46.2', start: at, end: at + 4 }]]);
        assert.deepEqual(named(g, reply, []), [
          ['200', null],
          ['$45.10', null],
          ['47.30', null],
        ]);
      });

      test(`DESIGN §18: ${p}: a stopped reply ends with done "stopped" and the grounding of what it produced, the same stored, in the messages API and in a resume's snapshot`, async () => {
        const u = await trader(p);
        let release: () => void = () => undefined;
        const held = new Promise<void>((r) => (release = r));
        llm(p).enqueueStream({ chunks: ['AAPL is at $232.80', ' and support is $228.15', ' never sent 999'], hold: { afterChunks: 2, until: held } });
        const post = openStream(base, await t.token(u), message('AAPL at 232.8?'));
        assert.equal(await post.status, 200);
        await post.deltas(2);
        const conversationId = String(post.frames[0]?.data['conversationId']);
        const stop = await t.call('POST', `/api/advisor/conversations/${conversationId}/stop`, { user: u });
        assert.equal(stop.statusCode, 202, stop.body);
        await post.ended;
        release();
        const done = post.frames.at(-1);
        assert.deepEqual([done?.event, done?.data['finishReason']], ['done', 'stopped']);
        const g = grounding(done?.data);
        const produced = 'AAPL is at $232.80 and support is $228.15';
        assert.deepEqual(g, {
          figures: 2,
          matched: 1,
          unmatched: [{ text: '$228.15', start: 34, end: 41 }],
          sources: [{ text: '$232.80', start: 11, end: 18, toolCallId: null }],
        });
        assert.equal(produced.slice(34, 41), '$228.15');
        const { row, api, snapshot } = await everywhere(u, conversationId, String(post.frames[0]?.data['assistantMessageId']));
        assert.deepEqual(row, g);
        assert.deepEqual(api, g);
        assert.deepEqual([snapshot['status'], snapshot['text'], snapshot['grounding']], ['interrupted', produced, g]);
      });

      test(`DESIGN §18: ${p}: a failed reply ends with error (no grounding on it) and its stored reply, the messages API and a resume's snapshot carry the grounding of what it produced`, async () => {
        const u = await trader(p);
        llm(p).enqueueStream({ chunks: ['Your balance is $25,098', ' and AAPL is at $301.20', ' lost'], errorAfterChunks: 2 });
        const res = await send(t, u, null, message('What is my balance?'));
        const end = res.frames.at(-1);
        assert.equal(end?.event, 'error', res.body);
        assert.equal(end?.data['grounding'], undefined);
        const produced = 'Your balance is $25,098 and AAPL is at $301.20';
        assert.equal(textOf(res), produced);
        const start = startOf(res);
        const { row, api, snapshot } = await everywhere(u, String(start['conversationId']), String(start['assistantMessageId']));
        // No tool ran and the user wrote no figure: nothing to match.
        const expected = {
          figures: 2,
          matched: 0,
          unmatched: [
            { text: '$25,098', start: 16, end: 23 },
            { text: '$301.20', start: 39, end: 46 },
          ],
          sources: [],
        };
        assert.deepEqual(row, expected);
        assert.deepEqual(api, expected);
        assert.deepEqual([snapshot['status'], snapshot['text'], snapshot['grounding']], ['failed', produced, expected]);
      });
    });
  }
});
