/**
 * A ticker's interval is cut into at most this many slots, each at least MIN_SLOT_MS long: with 10,000
 * members a tick serves about 100 (its pings written, its Redis calls sent), a few milliseconds of work,
 * not a stall the turns streaming beside them would feel.
 */
const MAX_SLOTS = 100;
const MIN_SLOT_MS = 100;

/**
 * Runs `each` over every member once per interval on one timer, however many members there are
 * (instead of a timer per member), and only while there are members. Members are dealt round-robin
 * into slots and one slot is served per tick, so the work (a ping write, a Redis call) is spread
 * over the interval rather than done for thousands of members at once. A member's first turn comes
 * within one interval of joining, then one every interval. `eachSlot` (optional) then gets the slot's
 * members together, for work done once for many (one statement marking them all).
 */
export class Ticker<T> {
  readonly #slots: Set<T>[];
  /** Each member's slot, so that leaving costs one lookup, not a search of every slot. */
  readonly #slotOf = new Map<T, Set<T>>();
  readonly #tickMs: number;
  readonly #each: (member: T) => void;
  readonly #eachSlot: ((members: readonly T[]) => void) | undefined;
  #dealt = 0;
  #turn = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(intervalMs: number, each: (member: T) => void, eachSlot?: (members: readonly T[]) => void) {
    const slots = Math.max(1, Math.min(MAX_SLOTS, Math.floor(intervalMs / MIN_SLOT_MS)));
    this.#slots = Array.from({ length: slots }, () => new Set<T>());
    this.#tickMs = intervalMs / slots;
    this.#each = each;
    this.#eachSlot = eachSlot;
  }

  add(member: T): void {
    if (this.#slotOf.has(member)) return;
    const slot = this.#slots[this.#dealt++ % this.#slots.length];
    if (slot === undefined) return;
    slot.add(member);
    this.#slotOf.set(member, slot);
    this.#timer ??= setInterval(Ticker.#tick<T>, this.#tickMs, this);
  }

  delete(member: T): void {
    const slot = this.#slotOf.get(member);
    if (slot === undefined) return;
    this.#slotOf.delete(member);
    slot.delete(member);
    if (this.#slotOf.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  static #tick<T>(t: Ticker<T>): void {
    const slot = t.#slots[t.#turn++ % t.#slots.length];
    if (slot === undefined || slot.size === 0) return;
    for (const member of slot) t.#each(member);
    t.#eachSlot?.([...slot]);
  }
}
