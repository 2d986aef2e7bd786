import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Schemas } from './api/client.ts';
import { EMPTY_REPLY, applyFrame, ended, replyOf, type Frame, type Reply } from './reply.ts';

const usage: Schemas['Usage'] = { inputTokens: 1200, outputTokens: 300, cachedInputTokens: null, reasoningTokens: null, estimatedCostUsd: 0.0004 };
const start: Frame = {
  id: 1,
  event: 'start',
  data: {
    conversationId: 'c1',
    userMessageId: 'u1',
    assistantMessageId: 'a1',
    provider: 'openai',
    model: 'gpt-4o-mini',
    billing: { source: 'allowance', credits: 0 },
  } satisfies Schemas['StreamStartFrame'],
};
const delta = (id: number, text: string): Frame => ({ id, event: 'delta', data: { text } });
const fold = (frames: readonly Frame[], from: Reply = EMPTY_REPLY): Reply => frames.reduce(applyFrame, from);

describe('applyFrame', () => {
  it('takes the start frame’s reply id and billing, and joins deltas into one text part', () => {
    const r = fold([start, delta(2, 'Keep '), delta(3, 'risk small.')]);
    assert.equal(r.assistantMessageId, 'a1');
    assert.deepEqual(r.billing, { source: 'allowance', credits: 0 });
    assert.deepEqual(r.parts, [{ type: 'text', text: 'Keep risk small.' }]);
    assert.equal(r.lastEventId, 3);
    assert.equal(ended(r), false);
  });

  it('puts tool calls and results between text parts, in order', () => {
    const r = fold([
      start,
      delta(2, 'Looking.'),
      { id: 3, event: 'tool_call', data: { id: 't1', name: 'get_quote', arguments: { symbol: 'AAPL' } } },
      { id: 4, event: 'tool_result', data: { id: 't1', name: 'get_quote', ok: true, result: { price: 1 } } },
      delta(5, 'It is 1.'),
    ]);
    assert.deepEqual(
      r.parts.map((p) => p.type),
      ['text', 'tool_call', 'tool_result', 'text'],
    );
    assert.deepEqual(r.parts.at(-1), { type: 'text', text: 'It is 1.' });
  });

  it('ignores a frame already taken in (a resume that overlaps)', () => {
    const r = fold([start, delta(2, 'a'), delta(3, 'b')]);
    assert.equal(applyFrame(r, delta(3, 'b')), r);
    assert.equal(applyFrame(r, delta(2, 'a')), r);
    assert.deepEqual(applyFrame(r, delta(4, 'c')).parts, [{ type: 'text', text: 'abc' }]);
  });

  it('replaces everything with a snapshot, even one with an older id', () => {
    const r = fold([start, delta(2, 'stale')]);
    const snap: Frame = {
      id: 0,
      event: 'snapshot',
      data: { assistantMessageId: 'a1', status: 'streaming', text: 'fresh', parts: [{ type: 'text', text: 'fresh' }] } satisfies Schemas['StreamSnapshotFrame'],
    };
    const s = applyFrame(r, snap);
    assert.deepEqual(s.parts, [{ type: 'text', text: 'fresh' }]);
    assert.equal(s.lastEventId, 2, 'a resume still starts after the last frame taken in');
    assert.equal(s.usage, null);
  });

  it('ends complete on done, interrupted when stopped or aborted', () => {
    const done = (finishReason: Schemas['StreamDoneFrame']['finishReason']): Frame => ({ id: 9, event: 'done', data: { finishReason, usage } });
    const r = fold([start, delta(2, 'x'), done('stop')]);
    assert.equal(r.status, 'complete');
    assert.equal(r.finishReason, 'stop');
    assert.deepEqual(r.usage, usage);
    assert.equal(ended(r), true);
    assert.equal(fold([start, done('stopped')]).status, 'interrupted');
    assert.equal(fold([start, done('aborted')]).status, 'interrupted');
    assert.equal(fold([start, done('length')]).status, 'complete');
  });

  it('DESIGN §18: takes the grounding of done, and of a snapshot (a resumed reply), replacing what it had', () => {
    const grounding = {
      figures: 2,
      matched: 1,
      unmatched: [{ text: '$260', start: 14, end: 18 }],
      sources: [{ text: '232.80', start: 3, end: 9, toolCallId: 't1' }],
    };
    const done = fold([
      start,
      delta(2, 'At 232.80, to $260.'),
      { id: 3, event: 'done', data: { finishReason: 'stop', usage, grounding } satisfies Schemas['StreamDoneFrame'] },
    ]);
    assert.deepEqual(done.grounding, grounding);
    assert.equal(
      fold([start, delta(2, 'x'), { id: 3, event: 'done', data: { finishReason: 'stop', usage } }]).grounding,
      null,
      'a done without grounding: none',
    );
    const snap: Frame = {
      id: 0,
      event: 'snapshot',
      data: { assistantMessageId: 'a1', status: 'complete', text: 'At 232.80, to $260.', parts: [], grounding } satisfies Schemas['StreamSnapshotFrame'],
    };
    assert.deepEqual(applyFrame(fold([start, delta(2, 'At')]), snap).grounding, grounding);
    const stale = applyFrame(done, { ...snap, data: { assistantMessageId: 'a1', status: 'streaming', text: 'At', parts: [] } });
    assert.equal(stale.grounding, null, 'a snapshot of a reply still running has none yet');
  });

  it('ends failed on error, with its code and whether a retry may help', () => {
    const r = fold([start, { id: 2, event: 'error', data: { code: 'PROVIDER_UNAVAILABLE', message: 'down', retryable: true } }]);
    assert.equal(r.status, 'failed');
    assert.deepEqual(r.error, { code: 'PROVIDER_UNAVAILABLE', message: 'down', retryable: true });
  });

  it('moves past an unknown event without changing the reply', () => {
    const r = fold([start, delta(2, 'x')]);
    const next = applyFrame(r, { id: 3, event: 'ping', data: {} });
    assert.deepEqual(next, { ...r, lastEventId: 3 });
  });
});

describe('replyOf', () => {
  it('reads a stored reply without parts as one text part', () => {
    const m: Schemas['Message'] = {
      id: 'a1',
      role: 'assistant',
      text: 'Old reply',
      parts: [],
      status: 'failed',
      clientMessageId: null,
      finishReason: null,
      usage: null,
      error: { code: 'PROVIDER_ERROR', retryable: false },
      attachments: [],
      billing: { source: 'credits', credits: 0, status: 'returned' },
      createdAt: '2026-11-28T00:00:00Z',
      completedAt: null,
    };
    const r = replyOf(m);
    assert.deepEqual(r.parts, [{ type: 'text', text: 'Old reply' }]);
    assert.deepEqual(r.error, { code: 'PROVIDER_ERROR', retryable: false, message: '' });
    assert.equal(r.billing?.status, 'returned');
    assert.equal(ended(r), true);
    assert.equal(r.grounding, null, 'stored before the check: no grounding');
  });

  it('DESIGN §18: reads a stored reply’s grounding', () => {
    const grounding: Schemas['Grounding'] = { figures: 1, matched: 0, unmatched: [{ text: '$260', start: 6, end: 10 }], sources: [] };
    const m: Schemas['Message'] = {
      id: 'a2',
      role: 'assistant',
      text: 'Up to $260',
      parts: [{ type: 'text', text: 'Up to $260' }],
      status: 'complete',
      clientMessageId: null,
      finishReason: 'stop',
      usage,
      error: null,
      attachments: [],
      billing: null,
      createdAt: '2026-11-28T00:00:00Z',
      completedAt: '2026-11-28T00:00:01Z',
      grounding,
    };
    assert.deepEqual(replyOf(m).grounding, grounding);
  });
});
