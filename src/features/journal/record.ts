// What a write to an account's trades keeps up to date, in the write's own transaction (the account
// row locked, so writes to one account apply one after another): each fill's FIFO outcome, each
// symbol's book, each touched day's figures. A fill that lands after its symbol's last one continues
// from the stored book; one that lands earlier, or a delete, replays that symbol from its first fill
// and rewrites the outcomes that changed. Other symbols are untouched: FIFO is per symbol.
import type { Trx } from '../../db/types.ts';
import { AMOUNT_PLACES, formatScaled, parseUnits, scaledFrom, UNIT_PLACES } from './decimal.ts';
import { applyFill, compareFills, emptyBook, loadBook, storeBook, type Book, type Fill, type FillOutcome, type StoredBook } from './fifo.ts';
import * as repo from './repo.ts';

export type NewTrade = repo.TradeInsert;

/** What was removed: enough to find its symbol and its day. */
export interface RemovedTrade {
  readonly symbol: string;
  readonly tradingDay: string;
}

function units(text: string): bigint {
  const v = parseUnits(text);
  if (v === undefined) throw new Error(`not a trade decimal: ${text}`);
  return v;
}

const fillOfNew = (t: NewTrade): Fill => ({
  id: t.id,
  executedAt: t.executedAt.getTime(),
  tradingDay: t.tradingDay,
  side: t.side,
  quantity: units(t.quantity),
  price: units(t.price),
  fee: units(t.fee),
});

const fillOfRow = (r: repo.TradeRow): Fill => ({
  id: r.id,
  executedAt: r.executed_at.getTime(),
  tradingDay: r.trading_day,
  side: r.side,
  quantity: scaledFrom(r.quantity, UNIT_PLACES),
  price: scaledFrom(r.price, UNIT_PLACES),
  fee: scaledFrom(r.fee, UNIT_PLACES),
});

export function outcomeColumns(o: FillOutcome): repo.OutcomeColumns {
  return {
    realized_pnl: formatScaled(o.realized, AMOUNT_PLACES),
    trip_net: o.tripNet === null ? null : formatScaled(o.tripNet, AMOUNT_PLACES),
    position_quantity: formatScaled(o.positionQuantity, UNIT_PLACES),
    position_cost: formatScaled(o.positionCost, AMOUNT_PLACES),
    position_opened_at: o.positionOpenedAt === null ? null : new Date(o.positionOpenedAt),
  };
}

function sameOutcome(row: repo.TradeRow, o: FillOutcome): boolean {
  return (
    scaledFrom(row.realized_pnl, AMOUNT_PLACES) === o.realized &&
    (row.trip_net === null ? o.tripNet === null : o.tripNet !== null && scaledFrom(row.trip_net, AMOUNT_PLACES) === o.tripNet) &&
    scaledFrom(row.position_quantity, UNIT_PLACES) === o.positionQuantity &&
    scaledFrom(row.position_cost, AMOUNT_PLACES) === o.positionCost &&
    (row.position_opened_at?.getTime() ?? null) === o.positionOpenedAt
  );
}

const after = (book: StoredBook | undefined, first: Fill): boolean =>
  book === undefined || book.lastExecutedAt === null || book.lastId === null || compareFills(first, { executedAt: book.lastExecutedAt, id: book.lastId }) > 0;

/**
 * Stores `added` and brings outcomes, books and days up to date with them and with `removed` (already
 * deleted in `trx`). Runs inside the transaction that locked the account.
 */
export async function recordTrades(trx: Trx, accountId: string, added: readonly NewTrade[], removed: readonly RemovedTrade[]): Promise<void> {
  const bySymbol = new Map<string, NewTrade[]>();
  for (const t of added) {
    const list = bySymbol.get(t.symbol);
    if (list) list.push(t);
    else bySymbol.set(t.symbol, [t]);
  }
  for (const r of removed) if (!bySymbol.has(r.symbol)) bySymbol.set(r.symbol, []);
  const stored = await repo.books(trx, accountId, [...bySymbol.keys()]);
  const days = new Set<string>([...added, ...removed].map((t) => t.tradingDay));
  const inserts: (NewTrade & repo.OutcomeColumns)[] = [];
  const updates: (repo.OutcomeColumns & { id: string })[] = [];
  const saved: { symbol: string; book: StoredBook }[] = [];
  const emptied: string[] = [];
  for (const [symbol, trades] of bySymbol) {
    const fresh = trades.map((t) => ({ trade: t, fill: fillOfNew(t) })).sort((a, b) => compareFills(a.fill, b.fill));
    const storedBook = stored.get(symbol);
    const first = fresh[0];
    let book: Book;
    if (removed.every((r) => r.symbol !== symbol) && first !== undefined && after(storedBook, first.fill)) {
      book = storedBook === undefined ? emptyBook() : loadBook(storedBook);
      for (const { trade, fill } of fresh) inserts.push({ ...trade, ...outcomeColumns(applyFill(book, fill)) });
    } else {
      book = emptyBook();
      const existing = (await repo.symbolFills(trx, accountId, symbol)).map((row) => ({ row, fill: fillOfRow(row) }));
      const merged: { fill: Fill; row?: repo.TradeRow; trade?: NewTrade }[] = [...existing, ...fresh].sort((a, b) => compareFills(a.fill, b.fill));
      for (const entry of merged) {
        const outcome = applyFill(book, entry.fill);
        if (entry.trade !== undefined) inserts.push({ ...entry.trade, ...outcomeColumns(outcome) });
        else if (entry.row !== undefined && !sameOutcome(entry.row, outcome)) {
          updates.push({ id: entry.row.id, ...outcomeColumns(outcome) });
          days.add(entry.row.trading_day);
        }
      }
    }
    if (book.lastId === null) emptied.push(symbol);
    else saved.push({ symbol, book: storeBook(book) });
  }
  await repo.insertTrades(trx, accountId, inserts);
  await repo.updateOutcomes(trx, updates);
  await repo.saveBooks(trx, accountId, saved, emptied);
  await repo.recomputeDays(trx, accountId, [...days]);
}
