import type { Deps } from '../../deps.ts';
import { invalidCursor, makeCursor, readCursor } from '../../http/cursor.ts';
import { AppError } from '../../http/errors.ts';
import { accountWithZones, getAccount, lockAccountWithZones } from '../accounts/service.ts';
import { calendarDate, zoneAt, type TimezoneChange } from '../accounts/timezones.ts';
import { AMOUNT_PLACES, COST_PLACES, formatScaled, money, scaledFrom, UNIT_PLACES } from './decimal.ts';
import { exclusionsOf } from './exclusions.ts';
import { checkTrade, isProblem, sameFill, tradingDayOf, type FieldProblem, type FillFields } from './fields.ts';
import { balanceOf, journalOf, netOf, noRisk, type DayFigures } from './journal.ts';
import { recordTrades, type NewTrade } from './record.ts';
import * as repo from './repo.ts';
import { dayOfTrips, groupOf, groupTotals, noTrips, type TripGroup } from './round-trips.ts';
import type { CreateTradeInput, JournalDto, JournalQueryInput, TradeDto, TradeListQueryInput, UpdateTradeInput } from './schemas.ts';

export type JournalDeps = Pick<Deps, 'db' | 'clock' | 'ids' | 'vault'>;

const DAY_MS = 86_400_000;
/** DESIGN §14: `from` and `to` at most three years apart (1,096 days: three years with a leap day). */
const MAX_JOURNAL_SPAN_DAYS = 3 * 365 + 1;
const DEFAULT_JOURNAL_DAYS = 30;
const DEFAULT_PAGE = 50;

const canonical = (text: string): string => formatScaled(scaledFrom(text, UNIT_PLACES), UNIT_PLACES);

export function toDto(row: repo.ListedTradeRow): TradeDto {
  return {
    id: row.id,
    accountId: row.account_id,
    symbol: row.symbol,
    side: row.side,
    quantity: canonical(row.quantity),
    price: canonical(row.price),
    fee: canonical(row.fee),
    executedAt: row.executed_at.toISOString(),
    tradingDay: row.trading_day,
    externalId: row.external_id,
    note: row.note,
    tags: row.tags,
    createdAt: row.created_at.toISOString(),
    assetClass: row.asset_class as TradeDto['assetClass'],
    multiplier: canonical(row.multiplier),
    stopPrice: row.stop_price === null ? null : canonical(row.stop_price),
  };
}

/** The fill fields of a stored trade, canonical, for comparing with a trade sent again. */
export function storedFill(row: repo.TradeRow): FillFields {
  return {
    symbol: row.symbol,
    assetClass: row.asset_class as FillFields['assetClass'],
    multiplier: canonical(row.multiplier),
    side: row.side,
    quantity: canonical(row.quantity),
    price: canonical(row.price),
    fee: canonical(row.fee),
    executedAt: row.executed_at,
  };
}

export function invalid(problem: FieldProblem): AppError {
  return new AppError('VALIDATION_ERROR', `${problem.path}: ${problem.message}`, { details: [problem] });
}

const externalIdReused = (): AppError =>
  new AppError('TRADE_EXTERNAL_ID_REUSED', 'a trade with this externalId and other fields is already stored on this account');

const tradeNotFound = (): AppError => new AppError('NOT_FOUND', 'trade not found');

/** DESIGN §14: `201` with the new trade, or `200` with the stored one when the same externalId and fill were sent before. */
export async function createTrade(
  deps: JournalDeps,
  userId: string,
  accountId: string,
  input: CreateTradeInput,
): Promise<{ trade: TradeDto; created: boolean }> {
  const now = deps.clock.now();
  const fields = checkTrade(input, now);
  if (isProblem(fields)) throw invalid(fields);
  return deps.db.transaction().execute(async (trx) => {
    const { account, timezones } = await lockAccountWithZones(trx, userId, accountId);
    if (fields.externalId !== null) {
      const [stored] = await repo.tradesByExternalIds(trx, accountId, [fields.externalId]);
      if (stored) {
        if (!sameFill(storedFill(stored), fields)) throw externalIdReused();
        return { trade: toDto(stored), created: false };
      }
    }
    const trade: NewTrade = {
      ...fields,
      id: deps.ids.uuid(),
      tradingDay: tradingDayOf(timezones, account.timezone, fields.executedAt),
      importKey: null,
      createdAt: now,
    };
    await recordTrades(trx, accountId, { timezones, fallback: account.timezone }, [trade], []);
    return { trade: newTradeDto(accountId, trade), created: true };
  });
}

export function newTradeDto(accountId: string, t: NewTrade): TradeDto {
  return {
    id: t.id,
    accountId,
    symbol: t.symbol,
    side: t.side,
    quantity: t.quantity,
    price: t.price,
    fee: t.fee,
    executedAt: t.executedAt.toISOString(),
    tradingDay: t.tradingDay,
    externalId: t.externalId,
    note: t.note,
    tags: [...t.tags],
    createdAt: t.createdAt.toISOString(),
    assetClass: t.assetClass as TradeDto['assetClass'],
    multiplier: t.multiplier,
    stopPrice: t.stopPrice,
  };
}

/** A note alone changes the trade; tags change its round trip's tags too (its symbol's trips written anew). */
export async function updateTrade(deps: JournalDeps, userId: string, accountId: string, tradeId: string, patch: UpdateTradeInput): Promise<TradeDto> {
  if (patch.tags === undefined) {
    await getAccount(deps, userId, accountId);
    const row = await repo.updateNoteAndTags(deps.db, accountId, tradeId, patch);
    if (!row) throw tradeNotFound();
    return toDto(row);
  }
  return deps.db.transaction().execute(async (trx) => {
    const { account, timezones } = await lockAccountWithZones(trx, userId, accountId);
    const row = await repo.updateNoteAndTags(trx, accountId, tradeId, patch);
    if (!row) throw tradeNotFound();
    await recordTrades(trx, accountId, { timezones, fallback: account.timezone }, [], [{ symbol: row.symbol, tradingDay: row.trading_day }]);
    return toDto(row);
  });
}

export async function deleteTrade(deps: JournalDeps, userId: string, accountId: string, tradeId: string): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const { account, timezones } = await lockAccountWithZones(trx, userId, accountId);
    const row = await repo.deleteTrade(trx, accountId, tradeId);
    if (!row) throw tradeNotFound();
    await recordTrades(trx, accountId, { timezones, fallback: account.timezone }, [], [{ symbol: row.symbol, tradingDay: row.trading_day }]);
  });
}

function checkRange(from: string | undefined, to: string | undefined): void {
  if (from !== undefined && to !== undefined && from > to) throw invalid({ path: '/from', message: 'must not be after `to`' });
}

/** A keyset position (an instant and an id) from a page cursor of `list`, bound to the account it was made for. */
export function cursorPosition(deps: JournalDeps, userId: string, list: 'trades' | 'round-trips', accountId: string, cursor: string): { at: Date; id: string } {
  const [account, ms, id, ...rest] = readCursor(deps.vault, userId, list, cursor);
  if (rest.length > 0 || account !== accountId || typeof ms !== 'number' || !Number.isSafeInteger(ms) || typeof id !== 'string') throw invalidCursor();
  return { at: new Date(ms), id };
}

/** DESIGN §14: a page of trades, newest executedAt first; keyset cursor on (executedAt, id). */
export async function listTrades(
  deps: JournalDeps,
  userId: string,
  accountId: string,
  q: TradeListQueryInput,
): Promise<{ items: TradeDto[]; nextCursor: string | null }> {
  await getAccount(deps, userId, accountId);
  checkRange(q.from, q.to);
  const limit = q.limit ?? DEFAULT_PAGE;
  const position = q.cursor === undefined ? undefined : cursorPosition(deps, userId, 'trades', accountId, q.cursor);
  const before = position === undefined ? undefined : { executedAt: position.at, id: position.id };
  const rows = await repo.listTrades(deps.db, accountId, { from: q.from, to: q.to, symbol: q.symbol?.toUpperCase(), before, limit: limit + 1 });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map(toDto),
    nextCursor: rows.length > limit && last ? makeCursor(deps.vault, userId, 'trades', [accountId, last.executed_at.getTime(), last.id]) : null,
  };
}

const dayMs = (day: string): number => Date.parse(`${day}T00:00:00Z`);
const dayOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

function dayFigures(r: repo.DayRow): DayFigures {
  const amount = (t: string | null): bigint | null => (t === null ? null : scaledFrom(t, AMOUNT_PLACES));
  return {
    tradingDay: r.trading_day,
    realized: scaledFrom(r.realized_pnl, AMOUNT_PLACES),
    fees: scaledFrom(r.fees, UNIT_PLACES),
    fills: r.fills,
    roundTrips: r.round_trips,
    wins: r.wins,
    losses: r.losses,
    grossWin: scaledFrom(r.gross_win, AMOUNT_PLACES),
    grossLoss: scaledFrom(r.gross_loss, AMOUNT_PLACES),
    largestWin: amount(r.largest_win),
    largestLoss: amount(r.largest_loss),
  };
}

const netOfSums = (sums: { realized: string; fees: string }): bigint =>
  scaledFrom(sums.realized, AMOUNT_PLACES) - scaledFrom(sums.fees, UNIT_PLACES) * 10n ** BigInt(AMOUNT_PLACES - UNIT_PLACES);

/** The account's balance as the journal gives it (startingBalance + all-time net P&L), for an account already known to be the caller's. */
export async function balance(deps: JournalDeps, account: { id: string; startingBalance: string }): Promise<string> {
  return balanceOf(account.startingBalance, netOfSums(await repo.allTimeSums(deps.db, account.id)));
}

/** A range of trading days as §14 takes it: `to` defaults to today in the account's zone, `from` to 29 days before; at most three years. */
export function journalRange(
  deps: JournalDeps,
  account: { timezone: string },
  timezones: readonly TimezoneChange[],
  q: { from?: string | undefined; to?: string | undefined },
): { from: string; to: string } {
  const now = deps.clock.now();
  const to = q.to ?? calendarDate(now, zoneAt(timezones, now.getTime()) ?? account.timezone);
  const from = q.from ?? dayOf(Math.max(0, dayMs(to) - (DEFAULT_JOURNAL_DAYS - 1) * DAY_MS));
  checkRange(from, to);
  if ((dayMs(to) - dayMs(from)) / DAY_MS > MAX_JOURNAL_SPAN_DAYS)
    throw invalid({ path: '/from', message: `must be at most three years (${MAX_JOURNAL_SPAN_DAYS} days) before \`to\`` });
  return { from, to };
}

/**
 * DESIGN §14: the journal of a range of trading days, read from the rollups kept on write. With
 * `exclude` (§17), the what-if: totals and days over the round trips that remain (each on its closing
 * day); open positions and the balance stay the facts. With `symbol`, the same over that symbol's round
 * trips, and its open position only.
 */
export async function journal(deps: JournalDeps, userId: string, accountId: string, q: JournalQueryInput): Promise<JournalDto> {
  const { account, timezones } = await accountWithZones(deps.db, userId, accountId);
  const { from, to } = journalRange(deps, account, timezones, q);
  const exclude = q.exclude === undefined ? undefined : exclusionsOf(q.exclude);
  const symbol = q.symbol?.toUpperCase();
  const range = { from, to, symbol };
  const kept = { ...range, exclude: exclude?.items };
  const fromTrips = exclude !== undefined || symbol !== undefined;
  const [days, [allTrips], [keptTrips], sums, positions] = await Promise.all([
    fromTrips
      ? repo.tripDays(deps.db, accountId, kept).then((rows) => rows.map(dayOfTrips))
      : repo.daysBetween(deps.db, accountId, from, to).then((rows) => rows.map(dayFigures)),
    repo.tripTotals(deps.db, accountId, range, null),
    exclude === undefined ? Promise.resolve([]) : repo.tripTotals(deps.db, accountId, kept, null),
    repo.allTimeSums(deps.db, accountId),
    repo.positionsAt(deps.db, accountId, to),
  ]);
  const all = allTrips === undefined ? undefined : groupOf(allTrips);
  const facts = {
    accountId,
    currency: account.currency,
    from,
    to,
    startingBalance: account.startingBalance,
    allTimeNet: netOfSums(sums),
    positions: positions
      .filter((p) => symbol === undefined || p.symbol === symbol)
      .map((p) => ({
        symbol: p.symbol,
        quantity: scaledFrom(p.quantity, UNIT_PLACES),
        cost: scaledFrom(p.cost, COST_PLACES),
        openedAt: p.opened_at.getTime(),
      })),
  };
  if (!fromTrips) return journalOf({ ...facts, days, risk: all?.risk ?? noRisk() });
  // The days list the remaining trips by closing day; the totals are their sums (wins, losses, drawdown) as summed by the database.
  const whatIf = journalOf({ ...facts, days, risk: noRisk() });
  if (exclude === undefined) return { ...whatIf, totals: all === undefined ? noTrips() : groupTotals(all) };
  const remaining = keptTrips === undefined ? undefined : groupOf(keptTrips);
  const netOfGroup = (g: TripGroup | undefined): bigint => (g === undefined ? 0n : netOf(g.sums));
  const tripsOf = (g: TripGroup | undefined): number => g?.sums.roundTrips ?? 0;
  return {
    ...whatIf,
    totals: remaining === undefined ? noTrips() : groupTotals(remaining),
    exclude: exclude.text,
    excluded: { roundTrips: tripsOf(all) - tripsOf(remaining), netPnl: money(netOfGroup(all) - netOfGroup(remaining)) },
  };
}
