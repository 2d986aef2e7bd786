import type { Clock } from '../../src/platform/clock.ts';

/** A clock that only moves when a test moves it. Starts at a fixed instant for repeatable runs. */
export class ManualClock implements Clock {
  #ms: number;

  constructor(start: Date = new Date('2030-01-01T00:00:00.000Z')) {
    this.#ms = start.getTime();
  }

  now(): Date {
    return new Date(this.#ms);
  }

  advance(ms: number): void {
    this.#ms += ms;
  }

  set(date: Date): void {
    this.#ms = date.getTime();
  }
}
