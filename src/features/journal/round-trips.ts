// DESIGN §17 round trips: what FIFO closed (fifo.ts ClosedTrip) as stored and as the API shows it, and
// the report's groups from the database's per-group sums (repo.tripTotals).
import { AMOUNT_PLACES, FEE_TO_AMOUNT, formatScaled, money, RATIO_PLACES, ratioUnits, scaledFrom, UNIT_PLACES } from './decimal.ts';
import type { ClosedTrip } from './fifo.ts';
import { emptyDay, noRisk, totalsOf, type DayFigures, type JournalTotals, type RiskFigures } from './journal.ts';
import type { RoundTripRow, TripDayRow, TripTotalsRow } from './repo.ts';
import type { RoundTripDto } from './schemas.ts';

const units = (v: bigint): string => formatScaled(v, UNIT_PLACES);
const amount = (v: bigint): string => formatScaled(v, AMOUNT_PLACES);

/** A closed trip as its row: exact amounts (the API rounds them on the way out). */
export function tripRow(symbol: string, t: ClosedTrip): RoundTripRow {
  const net = t.realized - t.fees * FEE_TO_AMOUNT;
  return {
    id: t.id,
    symbol,
    side: t.side,
    asset_class: t.assetClass,
    multiplier: units(t.multiplier),
    opened_at: new Date(t.openedAt),
    closed_at: new Date(t.closedAt),
    opening_day: t.openingDay,
    trading_day: t.tradingDay,
    open_hour: t.openHour,
    hold_seconds: String(Math.floor((t.closedAt - t.openedAt) / 1000)),
    max_quantity: units(t.maxQuantity),
    entry_average: units(t.entryAverage),
    exit_average: units(t.exitAverage),
    realized_pnl: amount(t.realized),
    fees: units(t.fees),
    net_pnl: amount(net),
    initial_risk: t.initialRisk === null ? null : amount(t.initialRisk),
    r_multiple: t.initialRisk === null ? null : formatScaled(ratioUnits(net, t.initialRisk), RATIO_PLACES),
    fills: t.fills,
    tags: [...t.tags],
  };
}

const moneyText = (text: string): string => money(scaledFrom(text, AMOUNT_PLACES));

export function roundTripDto(r: RoundTripRow): RoundTripDto {
  return {
    id: r.id,
    symbol: r.symbol,
    side: r.side,
    assetClass: r.asset_class,
    multiplier: units(scaledFrom(r.multiplier, UNIT_PLACES)),
    openedAt: r.opened_at.toISOString(),
    closedAt: r.closed_at.toISOString(),
    tradingDay: r.trading_day,
    holdSeconds: Number(r.hold_seconds),
    maxQuantity: units(scaledFrom(r.max_quantity, UNIT_PLACES)),
    entryAverage: units(scaledFrom(r.entry_average, UNIT_PLACES)),
    exitAverage: units(scaledFrom(r.exit_average, UNIT_PLACES)),
    realizedPnl: moneyText(r.realized_pnl),
    fees: units(scaledFrom(r.fees, UNIT_PLACES)),
    netPnl: moneyText(r.net_pnl),
    initialRisk: r.initial_risk === null ? null : moneyText(r.initial_risk),
    rMultiple: r.r_multiple === null ? null : formatScaled(scaledFrom(r.r_multiple, RATIO_PLACES), RATIO_PLACES),
    fills: r.fills,
    tags: r.tags,
  };
}

/** A group's summed trips as the journal's figures: one "day" of its sums, its own drawdown and R figures. */
export interface TripGroup {
  readonly key: string | null;
  readonly sums: DayFigures;
  readonly risk: RiskFigures;
  readonly maxDrawdown: bigint;
}

export function groupOf(r: TripTotalsRow): TripGroup {
  const a = (t: string | null): bigint | null => (t === null ? null : scaledFrom(t, AMOUNT_PLACES));
  return {
    key: r.key,
    sums: {
      ...emptyDay(''),
      realized: scaledFrom(r.realized, AMOUNT_PLACES),
      fees: scaledFrom(r.fees, UNIT_PLACES),
      fills: r.fills,
      roundTrips: r.trips,
      wins: r.wins,
      losses: r.losses,
      grossWin: scaledFrom(r.gross_win, AMOUNT_PLACES),
      grossLoss: scaledFrom(r.gross_loss, AMOUNT_PLACES),
      largestWin: a(r.largest_win),
      largestLoss: a(r.largest_loss),
    },
    risk: {
      rSum: scaledFrom(r.r_sum, RATIO_PLACES),
      rCount: r.r_count,
      riskNet: scaledFrom(r.risk_net, AMOUNT_PLACES),
      riskSum: scaledFrom(r.risk_sum, AMOUNT_PLACES),
    },
    maxDrawdown: scaledFrom(r.max_drawdown, AMOUNT_PLACES),
  };
}

/** The journal's totals of a group of trips. */
export const groupTotals = (g: TripGroup): JournalTotals => totalsOf([g.sums], g.risk, g.maxDrawdown);

/** No trips: the totals of nothing. */
export const noTrips = (): JournalTotals => totalsOf([], noRisk());

/** A closing day's trips as a journal day (its net is the trips' net). */
export function dayOfTrips(r: TripDayRow): DayFigures {
  return {
    ...emptyDay(r.trading_day),
    realized: scaledFrom(r.realized, AMOUNT_PLACES),
    fees: scaledFrom(r.fees, UNIT_PLACES),
    fills: r.fills,
    roundTrips: r.trips,
    wins: r.wins,
    losses: r.losses,
  };
}
