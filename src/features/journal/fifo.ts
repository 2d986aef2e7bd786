// FIFO lot matching for one symbol (DESIGN §14, §17), one fill at a time. Pure: the write path keeps a
// symbol's book between writes (trade_books) and replays from it, the full computation replays every
// fill from an empty book; both call `applyFill`, so they cannot disagree on a rule.
import { divHalfEven, FEE_TO_AMOUNT, pow10, UNIT_PLACES } from './decimal.ts';

export type Side = 'buy' | 'sell';

/** A fill as the engine reads it: quantities, prices, fees and multipliers in units of 10^-8. */
export interface Fill {
  readonly id: string;
  /** Epoch milliseconds. */
  readonly executedAt: number;
  readonly tradingDay: string;
  /** The hour (0–23) of `executedAt` in the account's zone in force then (the report's `hour`). */
  readonly hour: number;
  readonly side: Side;
  readonly quantity: bigint;
  readonly price: bigint;
  readonly fee: bigint;
  readonly multiplier: bigint;
  readonly stopPrice: bigint | null;
  readonly assetClass: string;
  readonly tags: readonly string[];
}

/** A round trip a fill closed (DESIGN §17): amounts in 10^-24, fees, quantities and prices in 10^-8. */
export interface ClosedTrip {
  /** The closing fill's id. */
  readonly id: string;
  readonly side: 'long' | 'short';
  readonly assetClass: string;
  readonly multiplier: bigint;
  readonly openedAt: number;
  readonly closedAt: number;
  readonly openingDay: string;
  readonly tradingDay: string;
  readonly openHour: number;
  readonly maxQuantity: bigint;
  readonly entryAverage: bigint;
  readonly exitAverage: bigint;
  readonly realized: bigint;
  readonly fees: bigint;
  readonly initialRisk: bigint | null;
  readonly fills: number;
  readonly tags: readonly string[];
}

/** What a fill did, stored on it: amounts in units of 10^-24, costs of 10^-16, quantities of 10^-8. */
export interface FillOutcome {
  /** Realized P&L of the quantity this fill closed. */
  readonly realized: bigint;
  /** Net P&L of the round trip this fill closed (realized less its fills' fees), or null. */
  readonly tripNet: bigint | null;
  /** The symbol's position after the fill: signed quantity (negative short), cost of its open lots, when it opened. */
  readonly positionQuantity: bigint;
  readonly positionCost: bigint;
  readonly positionOpenedAt: number | null;
  /** The round trip this fill closed, or null. */
  readonly trip: ClosedTrip | null;
}

interface Lot {
  quantity: bigint;
  readonly price: bigint;
  readonly multiplier: bigint;
}

/** The open round trip's running figures. */
interface Trip {
  openId: string;
  openedAt: number;
  openingDay: string;
  openHour: number;
  assetClass: string;
  multiplier: bigint;
  /** Realized P&L (10^-24) and fees (10^-24) so far. */
  realized: bigint;
  fees: bigint;
  maxQuantity: bigint;
  /** What opened or added to the position, and what closed it: quantity (10^-8) and cost (10^-16). */
  entryQuantity: bigint;
  entryCost: bigint;
  exitQuantity: bigint;
  exitCost: bigint;
  initialRisk: bigint | null;
  fills: number;
  tags: string[];
}

/** One symbol's open lots and its current round trip, between fills. */
export interface Book {
  /** +1 long, -1 short, 0 flat. */
  sign: 1 | -1 | 0;
  /** Open lots, oldest first (from `head`). */
  lots: Lot[];
  head: number;
  /** Sum of the open lots' quantities (≥ 0) and of their price × quantity (10^-16). */
  quantity: bigint;
  cost: bigint;
  trip: Trip | null;
  /** The last fill applied, in (executedAt, id) order. */
  lastExecutedAt: number | null;
  lastId: string | null;
}

const UNIT = pow10(UNIT_PLACES);

export function emptyBook(): Book {
  return { sign: 0, lots: [], head: 0, quantity: 0n, cost: 0n, trip: null, lastExecutedAt: null, lastId: null };
}

/** Fills in the order the journal applies them: `executedAt`, then id. */
export function compareFills(a: { executedAt: number; id: string }, b: { executedAt: number; id: string }): number {
  return a.executedAt - b.executedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

const abs = (v: bigint): bigint => (v < 0n ? -v : v);

function addTags(trip: Trip, tags: readonly string[]): void {
  for (const t of tags) if (!trip.tags.includes(t)) trip.tags.push(t);
}

/**
 * Applies one fill. A fill against the position first closes its oldest lots, each at its own
 * multiplier; a fill that closes more than the position flips it: the rest opens the next round trip
 * at the fill's price, and the fee is split by quantity — the closing share rounded half to even at 8
 * places, the opening share the rest, so the shares add up to the fee exactly.
 */
export function applyFill(book: Book, fill: Fill): FillOutcome {
  const direction = fill.side === 'buy' ? 1 : -1;
  book.lastExecutedAt = fill.executedAt;
  book.lastId = fill.id;
  const fee = fill.fee * FEE_TO_AMOUNT;
  if (book.sign === 0 || book.trip === null || book.sign === direction) {
    let trip = book.trip;
    if (book.sign === 0 || trip === null) trip = open(book, direction, fill, fill.quantity, 0n);
    else {
      trip.fills++;
      addTags(trip, fill.tags);
    }
    addLot(book, fill.quantity, fill.price, fill.multiplier);
    trip.fees += fee;
    trip.entryQuantity += fill.quantity;
    trip.entryCost += fill.quantity * fill.price;
    if (book.quantity > trip.maxQuantity) trip.maxQuantity = book.quantity;
    return outcome(book, 0n, null);
  }
  const trip = book.trip;
  let rest = fill.quantity;
  let realized = 0n;
  while (rest > 0n && book.head < book.lots.length) {
    const lot = book.lots[book.head] as Lot;
    const matched = lot.quantity < rest ? lot.quantity : rest;
    // A sell closing a long realizes (sell − buy); a buy closing a short realizes (sell − buy) too.
    realized += (direction === -1 ? fill.price - lot.price : lot.price - fill.price) * matched * lot.multiplier;
    lot.quantity -= matched;
    rest -= matched;
    book.quantity -= matched;
    book.cost -= lot.price * matched;
    if (lot.quantity === 0n) book.head++;
  }
  const closed = fill.quantity - rest;
  trip.fills++;
  addTags(trip, fill.tags);
  trip.exitQuantity += closed;
  trip.exitCost += closed * fill.price;
  trip.realized += realized;
  if (book.head < book.lots.length) {
    trip.fees += fee;
    return outcome(book, realized, null);
  }
  const closingFee = rest === 0n ? fill.fee : divHalfEven(fill.fee * closed, fill.quantity);
  trip.fees += closingFee * FEE_TO_AMOUNT;
  const done = closeTrip(book.sign === 1 ? 'long' : 'short', trip, fill);
  book.lots = [];
  book.head = 0;
  if (rest === 0n) {
    book.sign = 0;
    book.trip = null;
  } else {
    const next = open(book, direction, fill, rest, (fill.fee - closingFee) * FEE_TO_AMOUNT);
    addLot(book, rest, fill.price, fill.multiplier);
    next.entryQuantity = rest;
    next.entryCost = rest * fill.price;
    next.maxQuantity = rest;
  }
  return outcome(book, realized, done);
}

function open(book: Book, direction: 1 | -1, fill: Fill, quantity: bigint, fees: bigint): Trip {
  book.sign = direction;
  const risk = fill.stopPrice === null ? null : abs(fill.price - fill.stopPrice) * quantity * fill.multiplier;
  const trip: Trip = {
    openId: fill.id,
    openedAt: fill.executedAt,
    openingDay: fill.tradingDay,
    openHour: fill.hour,
    assetClass: fill.assetClass,
    multiplier: fill.multiplier,
    realized: 0n,
    fees,
    maxQuantity: 0n,
    entryQuantity: 0n,
    entryCost: 0n,
    exitQuantity: 0n,
    exitCost: 0n,
    initialRisk: risk === 0n ? null : risk,
    fills: 1,
    tags: [...fill.tags],
  };
  book.trip = trip;
  return trip;
}

function closeTrip(side: 'long' | 'short', trip: Trip, fill: Fill): ClosedTrip {
  return {
    id: fill.id,
    side,
    assetClass: trip.assetClass,
    multiplier: trip.multiplier,
    openedAt: trip.openedAt,
    closedAt: fill.executedAt,
    openingDay: trip.openingDay,
    tradingDay: fill.tradingDay,
    openHour: trip.openHour,
    maxQuantity: trip.maxQuantity,
    entryAverage: divHalfEven(trip.entryCost, trip.entryQuantity),
    exitAverage: divHalfEven(trip.exitCost, trip.exitQuantity),
    realized: trip.realized,
    fees: trip.fees / FEE_TO_AMOUNT,
    initialRisk: trip.initialRisk,
    fills: trip.fills,
    tags: [...trip.tags].sort(),
  };
}

function addLot(book: Book, quantity: bigint, price: bigint, multiplier: bigint): void {
  book.lots.push({ quantity, price, multiplier });
  book.quantity += quantity;
  book.cost += quantity * price;
}

function outcome(book: Book, realized: bigint, trip: ClosedTrip | null): FillOutcome {
  return {
    realized,
    tripNet: trip === null ? null : trip.realized - trip.fees * FEE_TO_AMOUNT,
    positionQuantity: book.sign < 0 ? -book.quantity : book.quantity,
    positionCost: book.cost,
    positionOpenedAt: book.trip?.openedAt ?? null,
    trip,
  };
}

/** Written with the stored book: version 2 books carry the open round trip (version 1 had none). */
export const BOOK_VERSION = 2;

/** A book as stored between writes: open lots and the open trip, every figure a decimal integer string. */
export interface StoredBook {
  readonly sign: 1 | -1 | 0;
  /** [quantity, price, multiplier] of each open lot, units of 10^-8, oldest first. */
  readonly lots: readonly (readonly [string, string, string?])[];
  readonly trip?: StoredTrip | null;
  readonly lastExecutedAt: number | null;
  readonly lastId: string | null;
}

type StoredTrip = { readonly [K in keyof Trip]: Trip[K] extends bigint ? string : Trip[K] extends bigint | null ? string | null : Trip[K] };

export function storeBook(book: Book): StoredBook {
  const t = book.trip;
  return {
    sign: book.sign,
    lots: book.lots.slice(book.head).map((l) => [l.quantity.toString(), l.price.toString(), l.multiplier.toString()] as const),
    trip:
      t === null
        ? null
        : {
            ...t,
            multiplier: t.multiplier.toString(),
            realized: t.realized.toString(),
            fees: t.fees.toString(),
            maxQuantity: t.maxQuantity.toString(),
            entryQuantity: t.entryQuantity.toString(),
            entryCost: t.entryCost.toString(),
            exitQuantity: t.exitQuantity.toString(),
            exitCost: t.exitCost.toString(),
            initialRisk: t.initialRisk === null ? null : t.initialRisk.toString(),
          },
    lastExecutedAt: book.lastExecutedAt,
    lastId: book.lastId,
  };
}

export function loadBook(stored: StoredBook): Book {
  const lots = stored.lots.map(([q, p, m]) => ({ quantity: BigInt(q), price: BigInt(p), multiplier: m === undefined ? UNIT : BigInt(m) }));
  const t = stored.trip ?? null;
  return {
    sign: stored.sign,
    lots,
    head: 0,
    quantity: lots.reduce((s, l) => s + l.quantity, 0n),
    cost: lots.reduce((s, l) => s + l.quantity * l.price, 0n),
    trip:
      t === null
        ? null
        : {
            ...t,
            tags: [...t.tags],
            multiplier: BigInt(t.multiplier),
            realized: BigInt(t.realized),
            fees: BigInt(t.fees),
            maxQuantity: BigInt(t.maxQuantity),
            entryQuantity: BigInt(t.entryQuantity),
            entryCost: BigInt(t.entryCost),
            exitQuantity: BigInt(t.exitQuantity),
            exitCost: BigInt(t.exitCost),
            initialRisk: t.initialRisk === null ? null : BigInt(t.initialRisk),
          },
    lastExecutedAt: stored.lastExecutedAt,
    lastId: stored.lastId,
  };
}
