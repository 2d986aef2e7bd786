// One timer for many members: each member once per interval, and a slot's members together (the
// heartbeat marks a tick's running turns alive in one statement).
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { Ticker } from './ticker.ts';

test('every member is served once per interval, and each tick hands its slot’s members over together', () => {
  mock.timers.enable({ apis: ['setInterval'] });
  try {
    const each: number[] = [];
    const slots: number[][] = [];
    const ticker = new Ticker<number>(
      300,
      (m) => each.push(m),
      (members) => slots.push([...members]),
    );
    for (let m = 0; m < 7; m++) ticker.add(m);
    mock.timers.tick(300);
    assert.deepEqual([...each].sort(), [0, 1, 2, 3, 4, 5, 6], 'each member once in one interval');
    assert.deepEqual(slots.flat().sort(), [0, 1, 2, 3, 4, 5, 6], 'and once in a slot’s batch');
    assert.equal(slots.length, 3, 'one batch per tick (three slots of 100 ms in a 300 ms interval)');
    ticker.delete(0);
    mock.timers.tick(300);
    assert.equal(each.filter((m) => m === 0).length, 1, 'a member deleted is served no more');
    for (let m = 1; m < 7; m++) ticker.delete(m);
    const before = slots.length;
    mock.timers.tick(900);
    assert.equal(slots.length, before, 'no members: no tick, no empty batch');
  } finally {
    mock.timers.reset();
  }
});
