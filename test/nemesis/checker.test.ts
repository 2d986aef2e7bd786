// The nemesis's own checks, on chains made by hand: what it must report (issue 41, item 1) and what
// it must not (a snapshot standing for the frames it replaces, a replay), and that a seed replays.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assembled, checkChains, INVARIANTS, Tally } from './checker.ts';
import { planFaults } from './faults.ts';
import { prng } from './prng.ts';
import { Recorder, type Chain } from './recorder.ts';

const TURN = '01a22530-6575-7633-a848-c595cad17cf8';
type F = [id: number, event: string, data: Record<string, unknown>];
const start: F = [1, 'start', { assistantMessageId: TURN }];
const delta = (id: number, text: string): F => [id, 'delta', { text }];
const done: (id: number) => F = (id) => [id, 'done', { finishReason: 'stop' }];
const shuttingDown: (id: number) => F = (id) => [id, 'error', { code: 'SHUTTING_DOWN', retryable: true }];

function chain(rec: Recorder, role: 'own' | 'follower', frames: F[]): Chain {
  const c = rec.chain('u', role, { turn: TURN, conversationId: 'c' });
  for (const [id, event, data] of frames) c.frames.push({ id, event, data, conn: 1, at: 0 });
  const last = c.frames.at(-1);
  if (last && (last.event === 'done' || last.event === 'error')) c.terminal = last;
  return c;
}

function verdict(chains: Chain[], replays: string[] = []): { invariant: string; detail: string }[] {
  const t = new Tally();
  checkChains(t, chains, new Set(replays), (c) => c.key);
  return t.violations;
}

describe('nemesis checker', () => {
  test('DESIGN §12: one id naming a delta to the own client and an error to a follower (issue 41 item 1) is reported', () => {
    const rec = new Recorder();
    const own = chain(rec, 'own', [start, delta(2, 'tok0 '), delta(3, 'tok1 '), shuttingDown(4)]);
    const follower = chain(rec, 'follower', [start, delta(2, 'tok0 '), shuttingDown(3)]);
    const v = verdict([own, follower]);
    assert.deepEqual(
      v.map((x) => x.invariant),
      [INVARIANTS.oneFramePerId],
    );
    assert.match(v[0]?.detail ?? '', /id 3 is "delta \{"text":"tok1 "\}" to own#1 and "error \{"code":"SHUTTING_DOWN"/);
  });

  test('DESIGN §12: a snapshot at id n holding the text of frames 1..n is not a second frame; one holding other text is reported', () => {
    const rec = new Recorder();
    const own = chain(rec, 'own', [start, delta(2, 'a '), delta(3, 'b '), delta(4, 'c '), done(5)]);
    const good = chain(rec, 'follower', [[3, 'snapshot', { text: 'a b ' }], delta(4, 'c '), done(5)]);
    assert.deepEqual(verdict([own, good]), []);
    assert.equal(assembled(good), 'a b c ');
    const bad = chain(rec, 'follower', [[3, 'snapshot', { text: 'a b c ' }], done(5)]);
    assert.deepEqual(
      verdict([own, bad]).map((x) => x.invariant),
      [INVARIANTS.oneFramePerId],
    );
  });

  test('DESIGN §12: an id that does not rise along a resumed chain is reported; a chain without a terminal frame is reported', () => {
    const rec = new Recorder();
    const back = chain(rec, 'own', [start, delta(2, 'a '), delta(3, 'b '), delta(3, 'b '), done(4)]);
    const open = chain(rec, 'follower', [start, delta(2, 'a ')]);
    open.abandoned = 'no terminal frame within 90000 ms';
    assert.deepEqual(
      verdict([back, open]).map((x) => x.invariant),
      [INVARIANTS.idsRise, INVARIANTS.terminalReached],
    );
  });

  test('DESIGN §7: a replay of a stored reply (same clientMessageId) is its own stream, not compared with the frame log', () => {
    const rec = new Recorder();
    const own = chain(rec, 'own', [start, delta(2, 'a '), delta(3, 'b '), shuttingDown(4)]);
    const replay = chain(rec, 'own', [start, delta(2, 'a b '), shuttingDown(3)]);
    assert.deepEqual(verdict([own, replay], [replay.key]), []);
  });

  test('--seed N replays the same fault schedule; another seed draws another', () => {
    const a = planFaults(prng(4141).fork(), 3, 3);
    assert.deepEqual(planFaults(prng(4141).fork(), 3, 3), a);
    assert.notDeepEqual(planFaults(prng(4142).fork(), 3, 3), a);
    assert.ok(a.length >= 5, `${a.length} faults in 3 minutes`);
    for (const f of a) assert.ok(f.gapMs >= 4000 && f.gapMs <= 16_000, `gap ${f.gapMs}`);
  });
});
