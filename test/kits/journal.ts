// Test support for the journal feature: the journal computed from every fill, the slow path the
// rollups the service reads (trade_days) are held to by the property test and the bench.
import { ratioUnits, FEE_TO_AMOUNT } from '../../src/features/journal/decimal.ts';
import { applyFill, compareFills, emptyBook, type Book, type Fill, type FillOutcome } from '../../src/features/journal/fifo.ts';
import { emptyDay, journalOf, noRisk, type DayFigures, type JournalInput, type PositionFigures } from '../../src/features/journal/journal.ts';
import type { JournalDto } from '../../src/features/journal/schemas.ts';

/** Adds a fill and what it did to its day. */
function countFill(day: DayFigures, fee: bigint, outcome: FillOutcome): void {
  day.fills++;
  day.fees += fee;
  day.realized += outcome.realized;
  const net = outcome.tripNet;
  if (net === null) return;
  day.roundTrips++;
  if (net > 0n) {
    day.wins++;
    day.grossWin += net;
    if (day.largestWin === null || net > day.largestWin) day.largestWin = net;
  } else if (net < 0n) {
    day.losses++;
    day.grossLoss += net;
    if (day.largestLoss === null || net < day.largestLoss) day.largestLoss = net;
  }
}

export interface SymbolFill extends Fill {
  readonly symbol: string;
}

/**
 * The journal computed from every fill of the account (any order): FIFO replay per symbol, days from
 * the outcomes, positions after the last fill whose trading day is on or before `to`.
 */
export function computeJournal(fills: readonly SymbolFill[], account: Omit<JournalInput, 'days' | 'allTimeNet' | 'positions' | 'risk'>): JournalDto {
  const ordered = [...fills].sort(compareFills);
  let cutoff = -1;
  ordered.forEach((f, i) => {
    if (f.tradingDay <= account.to) cutoff = i;
  });
  const books = new Map<string, Book>();
  const days = new Map<string, DayFigures>();
  let allTimeNet = 0n;
  let positions: PositionFigures[] = [];
  const risk = noRisk();
  ordered.forEach((f, i) => {
    let book = books.get(f.symbol);
    if (!book) books.set(f.symbol, (book = emptyBook()));
    const outcome = applyFill(book, f);
    const trip = outcome.trip;
    if (trip !== null && trip.initialRisk !== null && trip.tradingDay >= account.from && trip.tradingDay <= account.to) {
      const net = trip.realized - trip.fees * FEE_TO_AMOUNT;
      risk.rSum += ratioUnits(net, trip.initialRisk);
      risk.rCount++;
      risk.riskNet += net;
      risk.riskSum += trip.initialRisk;
    }
    allTimeNet += outcome.realized - f.fee * FEE_TO_AMOUNT;
    let day = days.get(f.tradingDay);
    if (!day) days.set(f.tradingDay, (day = emptyDay(f.tradingDay)));
    countFill(day, f.fee, outcome);
    if (i === cutoff) positions = positionsOf(books);
  });
  const inRange = [...days.values()]
    .filter((d) => d.tradingDay >= account.from && d.tradingDay <= account.to)
    .sort((a, b) => (a.tradingDay < b.tradingDay ? -1 : 1));
  return journalOf({ ...account, days: inRange, allTimeNet, positions, risk });
}

function positionsOf(books: ReadonlyMap<string, Book>): PositionFigures[] {
  const out: PositionFigures[] = [];
  for (const [symbol, b] of books) {
    if (b.sign !== 0 && b.trip !== null) out.push({ symbol, quantity: b.sign < 0 ? -b.quantity : b.quantity, cost: b.cost, openedAt: b.trip.openedAt });
  }
  return out;
}
