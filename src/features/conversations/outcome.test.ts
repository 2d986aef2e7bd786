// DESIGN §7, §10, §12: how a turn ends, from how its rounds ended and why it was stopped — the whole
// decision as one table (outcomeOf is pure).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RoundsEnd } from './relay.ts';
import { outcomeOf } from './turn.ts';
import type { StopCause } from './live-turn.ts';

const finished: RoundsEnd = { finish: 'stop', failure: undefined, toolCalls: 0 };
const cut: RoundsEnd = { finish: undefined, failure: { code: 'PROVIDER_RATE_LIMITED', retryable: true, detail: '429' }, toolCalls: 0 };
const endedEarly: RoundsEnd = { finish: undefined, failure: undefined, toolCalls: 0 };

test('DESIGN §7/§12 outcome table: status, terminal frame and finish reason for every way a turn ends', () => {
  const rows: [string, RoundsEnd, StopCause | undefined, [string, string | undefined, string]][] = [
    ['the provider finished', finished, undefined, ['complete', undefined, 'stop']],
    ['finished, then a stop came too late to matter', finished, 'stopped', ['complete', undefined, 'stop']],
    ['the provider failed mid-stream', cut, undefined, ['failed', 'PROVIDER_RATE_LIMITED', 'aborted']],
    ['the provider stream ended without its finish', endedEarly, undefined, ['failed', 'PROVIDER_UNAVAILABLE', 'aborted']],
    ['a stop was asked for (§12)', endedEarly, 'stopped', ['interrupted', undefined, 'stopped']],
    ['no client came back within the detach grace (§12)', endedEarly, 'client', ['interrupted', undefined, 'aborted']],
    ['the drain deadline (§10)', cut, 'shutdown', ['interrupted', 'SHUTTING_DOWN', 'aborted']],
    ['STREAM_MAX_DURATION_MS (§10)', endedEarly, 'deadline', ['failed', 'UPSTREAM_TIMEOUT', 'aborted']],
    ['another stream of the user holds the lease', endedEarly, 'superseded', ['interrupted', 'STREAM_IN_PROGRESS', 'aborted']],
  ];
  for (const [what, rounds, cause, expected] of rows) {
    const o = outcomeOf(rounds, cause);
    assert.deepEqual([o.status, o.error?.code, o.finishReason], expected, what);
  }
  assert.equal(outcomeOf(cut, 'superseded').error?.retryable, false, 'superseded is not retryable');
  assert.equal(outcomeOf(cut, undefined).error?.retryable, true);
});
