// What a write to an account's trades keeps up to date, in the write's own transaction (the account
// row locked, so writes to one account apply one after another): each fill's FIFO outcome, each
// symbol's book, each touched day's figures and the round trips closed. A fill that lands after its
// symbol's last one continues from the stored book; one that lands earlier, a delete or a change of a
// fill's tags replays that symbol from its first fill, rewrites the outcomes that changed and writes
// its round trips anew. Other symbols are untouched: FIFO is per symbol.
import type { Trx } from '../../db/types.ts';
import type { TimezoneChange } from '../accounts/timezones.ts';
import { AMOUNT_PLACES, COST_PLACES, formatScaled, parseUnits, scaledFrom, UNIT_PLACES } from './decimal.ts';
import { applyFill, BOOK_VERSION, compareFills, emptyBook, loadBook, storeBook, type Book, type Fill, type FillOutcome, type StoredBook } from './fifo.ts';
import { hourOf } from './fields.ts';
import * as repo from './repo.ts';
import { tripRow } from './round-trips.ts';

export type NewTrade = repo.TradeInsert;

/** A symbol to replay (a fill of it removed or re-tagged), and the day that fill is on (null: none, a book rebuilt). */
export interface RemovedTrade {
  readonly symbol: string;
  readonly tradingDay: string | null;
}

/** The account's zones: a fill's hour is read in the zone in force at its instant (DESIGN §9). */
export interface AccountZones {
  readonly timezones: readonly TimezoneChange[];
  readonly fallback: string;
}

function units(text: string): bigint {
  const v = parseUnits(text);
  if (v === undefined) throw new Error(`not a trade decimal: ${text}`);
  return v;
}

const fillOfNew = (t: NewTrade, zones: AccountZones): Fill => ({
  id: t.id,
  executedAt: t.executedAt.getTime(),
  tradingDay: t.tradingDay,
  // Read only when the fill opens a round trip: one zone lookup a trip, not one a fill.
  get hour() {
    return hourOf(zones.timezones, zones.fallback, t.executedAt);
  },
  side: t.side,
  quantity: units(t.quantity),
  price: units(t.price),
  fee: units(t.fee),
  multiplier: units(t.multiplier),
  stopPrice: t.stopPrice === null ? null : units(t.stopPrice),
  assetClass: t.assetClass,
  tags: t.tags,
});

const fillOfRow = (r: repo.ReplayRow, zones: AccountZones): Fill => ({
  id: r.id,
  executedAt: r.executed_at.getTime(),
  tradingDay: r.trading_day,
  get hour() {
    return hourOf(zones.timezones, zones.fallback, r.executed_at);
  },
  side: r.side,
  quantity: scaledFrom(r.quantity, UNIT_PLACES),
  price: scaledFrom(r.price, UNIT_PLACES),
  fee: scaledFrom(r.fee, UNIT_PLACES),
  multiplier: scaledFrom(r.multiplier, UNIT_PLACES),
  stopPrice: r.stop_price === null ? null : scaledFrom(r.stop_price, UNIT_PLACES),
  assetClass: r.asset_class,
  tags: r.tags,
});

function outcomeColumns(o: FillOutcome): repo.OutcomeColumns {
  return {
    realized_pnl: formatScaled(o.realized, AMOUNT_PLACES),
    trip_net: o.tripNet === null ? null : formatScaled(o.tripNet, AMOUNT_PLACES),
    position_quantity: formatScaled(o.positionQuantity, UNIT_PLACES),
    position_cost: formatScaled(o.positionCost, COST_PLACES),
    position_opened_at: o.positionOpenedAt === null ? null : new Date(o.positionOpenedAt),
  };
}

/**
 * Whether a stored fill already holds these outcome columns. Compared as the text the database returns,
 * which is the text written (a numeric keeps its digits), so parsing it back is not needed; a value
 * stored in another form of the same number would only be written again, unchanged.
 */
function sameOutcome(row: repo.ReplayRow, c: repo.OutcomeColumns): boolean {
  return (
    row.realized_pnl === c.realized_pnl &&
    row.trip_net === c.trip_net &&
    row.position_quantity === c.position_quantity &&
    row.position_cost === c.position_cost &&
    (row.position_opened_at?.getTime() ?? null) === (c.position_opened_at?.getTime() ?? null)
  );
}

/** Rows of outcomes, fills and round trips held back before they are sent as one batch of statements. */
const FLUSH_ROWS = 5000;

/**
 * The statements of one write, each sent when the one before it has ended, in the order given, without
 * waiting here for each: on PostgreSQL the server stores one symbol's rows while the next symbol is read
 * back and replayed in this process. A failure stops the ones after it. The transaction must not end
 * while one is still queued, so `done` (or `settled`, on the way out of a failure) is awaited before
 * returning.
 */
class Statements {
  #tail: Promise<unknown> = Promise.resolve();

  send<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#tail.then(run);
    this.#tail = next;
    next.catch(() => undefined);
    return next;
  }

  /** Every statement sent has ended; rejects with the first failure. */
  async done(): Promise<void> {
    await this.#tail;
  }

  /** Every statement sent has ended or will never run. */
  async settled(): Promise<void> {
    await this.#tail.catch(() => undefined);
  }
}

/** Whether `first` continues the stored book (a book of an older version is replayed instead). */
const continues = (stored: { book: StoredBook; version: number } | undefined, first: Fill): boolean => {
  if (stored === undefined) return true;
  const { book, version } = stored;
  if (version !== BOOK_VERSION) return false;
  return book.lastExecutedAt === null || book.lastId === null || compareFills(first, { executedAt: book.lastExecutedAt, id: book.lastId }) > 0;
};

/**
 * Stores `added` and brings outcomes, books, days and round trips up to date with them and with
 * `replayed` (fills already deleted or re-tagged in `trx`). Runs inside the transaction that locked the
 * account.
 */
export async function recordTrades(
  trx: Trx,
  accountId: string,
  zones: AccountZones,
  added: readonly NewTrade[],
  replayed: readonly RemovedTrade[],
): Promise<void> {
  const bySymbol = new Map<string, NewTrade[]>();
  for (const t of added) {
    const list = bySymbol.get(t.symbol);
    if (list) list.push(t);
    else bySymbol.set(t.symbol, [t]);
  }
  for (const r of replayed) if (!bySymbol.has(r.symbol)) bySymbol.set(r.symbol, []);
  const stored = await repo.books(trx, accountId, [...bySymbol.keys()]);
  const days = new Set<string>([...added, ...replayed].flatMap((t) => (t.tradingDay === null ? [] : [t.tradingDay])));
  const plans = [...bySymbol].map(([symbol, trades]) => {
    const fresh = trades.map((t) => ({ trade: t, fill: fillOfNew(t, zones) })).sort((a, b) => compareFills(a.fill, b.fill));
    const storedBook = stored.get(symbol);
    const first = fresh[0];
    const continued = replayed.every((r) => r.symbol !== symbol) && first !== undefined && continues(storedBook, first.fill);
    return { symbol, fresh, storedBook, continued };
  });
  const rewritten = plans.filter((p) => !p.continued).map((p) => p.symbol);
  let inserts: (NewTrade & repo.OutcomeColumns)[] = [];
  let updates: (repo.OutcomeColumns & { id: string })[] = [];
  let trips: repo.RoundTripRow[] = [];
  const saved: { symbol: string; book: StoredBook }[] = [];
  const emptied: string[] = [];
  // The days whose round trips change: those of the trips written and of the trips deleted.
  const tripDays = new Set<string>();
  const statements = new Statements();
  const flush = (): void => {
    const [i, u, t] = [inserts, updates, trips];
    if (i.length > 0) void statements.send(() => repo.insertTrades(trx, accountId, i));
    if (u.length > 0) void statements.send(() => repo.updateOutcomes(trx, u));
    if (t.length > 0) void statements.send(() => repo.insertRoundTrips(trx, accountId, t));
    [inserts, updates, trips] = [[], [], []];
  };
  // A replayed symbol's fills are asked for one symbol ahead of its replay, so that the database reads
  // them while the one before is replayed here.
  const reads = new Map<string, Promise<repo.ReplayRow[]>>();
  const readAhead = (index: number): void => {
    const symbol = rewritten[index];
    if (symbol !== undefined)
      reads.set(
        symbol,
        statements.send(() => repo.symbolFills(trx, accountId, symbol)),
      );
  };
  try {
    // The replayed symbols' round trips are all written anew, after this.
    const deletedDays = statements.send(() => repo.deleteRoundTrips(trx, accountId, rewritten));
    readAhead(0);
    let replays = 0;
    for (const { symbol, fresh, storedBook, continued } of plans) {
      let book: Book;
      const keep = (outcome: FillOutcome): void => {
        if (outcome.trip === null) return;
        const row = tripRow(symbol, outcome.trip);
        trips.push(row);
        tripDays.add(row.trading_day);
      };
      if (continued) {
        book = storedBook === undefined ? emptyBook() : loadBook(storedBook.book);
        for (const { trade, fill } of fresh) {
          const outcome = applyFill(book, fill);
          keep(outcome);
          inserts.push({ ...trade, ...outcomeColumns(outcome) });
        }
      } else {
        book = emptyBook();
        const rows = await (reads.get(symbol) ?? statements.send(() => repo.symbolFills(trx, accountId, symbol)));
        reads.delete(symbol);
        readAhead(++replays);
        const existing = rows.map((row) => ({ row, fill: fillOfRow(row, zones) }));
        const merged: { fill: Fill; row?: repo.ReplayRow; trade?: NewTrade }[] = [...existing, ...fresh].sort((a, b) => compareFills(a.fill, b.fill));
        for (const entry of merged) {
          const outcome = applyFill(book, entry.fill);
          keep(outcome);
          if (entry.trade !== undefined) inserts.push({ ...entry.trade, ...outcomeColumns(outcome) });
          else if (entry.row !== undefined) {
            const columns = outcomeColumns(outcome);
            if (!sameOutcome(entry.row, columns)) {
              updates.push({ id: entry.row.id, ...columns });
              days.add(entry.row.trading_day);
            }
          }
        }
      }
      if (book.lastId === null) emptied.push(symbol);
      else saved.push({ symbol, book: storeBook(book) });
      if (inserts.length + updates.length + trips.length >= FLUSH_ROWS) flush();
    }
    flush();
    void statements.send(() => repo.saveBooks(trx, accountId, saved, emptied, BOOK_VERSION));
    void statements.send(() => repo.recomputeDays(trx, accountId, [...days]));
    void statements.send(async () => {
      for (const day of await deletedDays) tripDays.add(day);
      await repo.recomputeTripGroups(trx, accountId, [...tripDays]);
    });
  } catch (err) {
    await statements.settled();
    throw err;
  }
  await statements.done();
  await repo.analyzeAfterGrowth(trx, added.length);
}
