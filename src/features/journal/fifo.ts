// FIFO lot matching for one symbol (DESIGN §14), one fill at a time. Pure: the write path keeps a
// symbol's book between writes (trade_books) and replays from it, the full computation replays every
// fill from an empty book; both call `applyFill`, so they cannot disagree on a rule.
import { divHalfEven, pow10, UNIT_PLACES } from './decimal.ts';

export type Side = 'buy' | 'sell';

/** A fill as the engine reads it: quantities, prices and fees in units of 10^-8. */
export interface Fill {
  readonly id: string;
  /** Epoch milliseconds. */
  readonly executedAt: number;
  readonly tradingDay: string;
  readonly side: Side;
  readonly quantity: bigint;
  readonly price: bigint;
  readonly fee: bigint;
}

/** What a fill did, stored on it: amounts in units of 10^-16, quantities of 10^-8. */
export interface FillOutcome {
  /** Realized P&L of the quantity this fill closed. */
  readonly realized: bigint;
  /** Net P&L of the round trip this fill closed (realized less its fills' fees), or null. */
  readonly tripNet: bigint | null;
  /** The symbol's position after the fill: signed quantity (negative short), cost of its open lots, when it opened. */
  readonly positionQuantity: bigint;
  readonly positionCost: bigint;
  readonly positionOpenedAt: number | null;
}

interface Lot {
  quantity: bigint;
  readonly price: bigint;
}

/** One symbol's open lots and its current round trip, between fills. */
export interface Book {
  /** +1 long, -1 short, 0 flat. */
  sign: 1 | -1 | 0;
  /** Open lots, oldest first (from `head`). */
  lots: Lot[];
  head: number;
  /** Sum of the open lots' quantities (≥ 0) and of their price × quantity. */
  quantity: bigint;
  cost: bigint;
  /** The open round trip: realized P&L so far, fees so far (10^-16), the instant it opened. */
  tripRealized: bigint;
  tripFees: bigint;
  openedAt: number | null;
  /** The last fill applied, in (executedAt, id) order. */
  lastExecutedAt: number | null;
  lastId: string | null;
}

const FEE_TO_AMOUNT = pow10(UNIT_PLACES);

export function emptyBook(): Book {
  return { sign: 0, lots: [], head: 0, quantity: 0n, cost: 0n, tripRealized: 0n, tripFees: 0n, openedAt: null, lastExecutedAt: null, lastId: null };
}

/** Fills in the order the journal applies them: `executedAt`, then id. */
export function compareFills(a: { executedAt: number; id: string }, b: { executedAt: number; id: string }): number {
  return a.executedAt - b.executedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * Applies one fill. A fill against the position first closes its oldest lots; a fill that closes
 * more than the position flips it: the rest opens the next round trip at the fill's price, and the
 * fee is split by quantity — the closing share rounded half to even at 8 places, the opening share
 * the rest, so the shares add up to the fee exactly.
 */
export function applyFill(book: Book, fill: Fill): FillOutcome {
  const direction = fill.side === 'buy' ? 1 : -1;
  book.lastExecutedAt = fill.executedAt;
  book.lastId = fill.id;
  const fee = fill.fee * FEE_TO_AMOUNT;
  if (book.sign === 0 || book.sign === direction) {
    if (book.sign === 0) open(book, direction, fill.executedAt, 0n);
    addLot(book, fill.quantity, fill.price);
    book.tripFees += fee;
    return outcome(book, 0n, null);
  }
  let rest = fill.quantity;
  let realized = 0n;
  while (rest > 0n && book.head < book.lots.length) {
    const lot = book.lots[book.head] as Lot;
    const matched = lot.quantity < rest ? lot.quantity : rest;
    // A sell closing a long realizes (sell − buy); a buy closing a short realizes (sell − buy) too.
    realized += (direction === -1 ? fill.price - lot.price : lot.price - fill.price) * matched;
    lot.quantity -= matched;
    rest -= matched;
    book.quantity -= matched;
    book.cost -= lot.price * matched;
    if (lot.quantity === 0n) book.head++;
  }
  if (book.head < book.lots.length) {
    book.tripRealized += realized;
    book.tripFees += fee;
    return outcome(book, realized, null);
  }
  const closed = fill.quantity - rest;
  const closingFee = rest === 0n ? fill.fee : divHalfEven(fill.fee * closed, fill.quantity);
  const tripNet = book.tripRealized + realized - book.tripFees - closingFee * FEE_TO_AMOUNT;
  book.lots = [];
  book.head = 0;
  if (rest === 0n) {
    book.sign = 0;
    book.tripRealized = 0n;
    book.tripFees = 0n;
    book.openedAt = null;
  } else {
    open(book, direction, fill.executedAt, (fill.fee - closingFee) * FEE_TO_AMOUNT);
    addLot(book, rest, fill.price);
  }
  return outcome(book, realized, tripNet);
}

function open(book: Book, direction: 1 | -1, at: number, fees: bigint): void {
  book.sign = direction;
  book.tripRealized = 0n;
  book.tripFees = fees;
  book.openedAt = at;
}

function addLot(book: Book, quantity: bigint, price: bigint): void {
  book.lots.push({ quantity, price });
  book.quantity += quantity;
  book.cost += quantity * price;
}

function outcome(book: Book, realized: bigint, tripNet: bigint | null): FillOutcome {
  return {
    realized,
    tripNet,
    positionQuantity: book.sign < 0 ? -book.quantity : book.quantity,
    positionCost: book.cost,
    positionOpenedAt: book.openedAt,
  };
}

/** A book as stored between writes: open lots only, every figure a decimal integer string. */
export interface StoredBook {
  readonly sign: 1 | -1 | 0;
  /** [quantity, price] of each open lot, units of 10^-8, oldest first. */
  readonly lots: readonly (readonly [string, string])[];
  readonly tripRealized: string;
  readonly tripFees: string;
  readonly openedAt: number | null;
  readonly lastExecutedAt: number | null;
  readonly lastId: string | null;
}

export function storeBook(book: Book): StoredBook {
  return {
    sign: book.sign,
    lots: book.lots.slice(book.head).map((l) => [l.quantity.toString(), l.price.toString()] as const),
    tripRealized: book.tripRealized.toString(),
    tripFees: book.tripFees.toString(),
    openedAt: book.openedAt,
    lastExecutedAt: book.lastExecutedAt,
    lastId: book.lastId,
  };
}

export function loadBook(stored: StoredBook): Book {
  const lots = stored.lots.map(([q, p]) => ({ quantity: BigInt(q), price: BigInt(p) }));
  return {
    sign: stored.sign,
    lots,
    head: 0,
    quantity: lots.reduce((s, l) => s + l.quantity, 0n),
    cost: lots.reduce((s, l) => s + l.quantity * l.price, 0n),
    tripRealized: BigInt(stored.tripRealized),
    tripFees: BigInt(stored.tripFees),
    openedAt: stored.openedAt,
    lastExecutedAt: stored.lastExecutedAt,
    lastId: stored.lastId,
  };
}
