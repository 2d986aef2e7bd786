// The journal of DESIGN §14 as pure functions: a day's figures from its fills' outcomes, and the
// journal (totals, days, open positions, balance) from the days of a range. The service reads the days
// from their rollup (trade_days, kept on write); the journal test kit (test/kits/journal.ts) builds the
// same from every fill, the path the property test holds the rollups to.
import { AMOUNT_PLACES, divHalfEven, FEE_TO_AMOUNT, formatScaled, money, moneyPer, pow10, ratio, RATIO_PLACES, scaledFrom, UNIT_PLACES } from './decimal.ts';
import type { JournalDto } from './schemas.ts';

/** One trading day's figures: amounts in units of 10^-16, fees of 10^-8. */
export interface DayFigures {
  readonly tradingDay: string;
  realized: bigint;
  fees: bigint;
  fills: number;
  roundTrips: number;
  wins: number;
  losses: number;
  /** Sums of the net P&L of the round trips won (> 0) and lost (< 0) that closed this day. */
  grossWin: bigint;
  grossLoss: bigint;
  largestWin: bigint | null;
  largestLoss: bigint | null;
}

/** An open position: signed quantity (10^-8, negative short), cost of its open lots (10^-16). */
export interface PositionFigures {
  readonly symbol: string;
  readonly quantity: bigint;
  readonly cost: bigint;
  readonly openedAt: number;
}

export function emptyDay(tradingDay: string): DayFigures {
  return { tradingDay, realized: 0n, fees: 0n, fills: 0, roundTrips: 0, wins: 0, losses: 0, grossWin: 0n, grossLoss: 0n, largestWin: null, largestLoss: null };
}

export const netOf = (day: Pick<DayFigures, 'realized' | 'fees'>): bigint => day.realized - day.fees * FEE_TO_AMOUNT;

export interface JournalInput {
  readonly accountId: string;
  readonly currency: string;
  readonly from: string;
  readonly to: string;
  /** The account's starting balance as stored (a decimal string). */
  readonly startingBalance: string;
  /** The days of the range that had fills, oldest first. */
  readonly days: readonly DayFigures[];
  /** Net P&L of every fill of the account, whatever its day (10^-16). */
  readonly allTimeNet: bigint;
  /** Positions open after the last fill on or before `to`. */
  readonly positions: readonly PositionFigures[];
  /** The planned-risk figures of the round trips that closed in the range. */
  readonly risk: RiskFigures;
}

export type JournalTotals = JournalDto['totals'];

/** Summed figures of the trips with a planned risk (DESIGN §17): their rMultiples (4 places), net P&L and risk (10^-24). */
export interface RiskFigures {
  rSum: bigint;
  rCount: number;
  riskNet: bigint;
  riskSum: bigint;
}

export const noRisk = (): RiskFigures => ({ rSum: 0n, rCount: 0, riskNet: 0n, riskSum: 0n });

/**
 * §14's totals over days (oldest first), with §17's averageR (mean rMultiple) and expectancyR (net over
 * risk). `knownDrawdown`: the drawdown already measured over the days these sums stand for.
 */
export function totalsOf(days: readonly DayFigures[], risk: RiskFigures, knownDrawdown?: bigint): JournalTotals {
  const sum = emptyDay('');
  let cumulative = 0n;
  let peak = 0n;
  let drawdown = 0n;
  for (const d of days) {
    sum.realized += d.realized;
    sum.fees += d.fees;
    sum.fills += d.fills;
    sum.roundTrips += d.roundTrips;
    sum.wins += d.wins;
    sum.losses += d.losses;
    sum.grossWin += d.grossWin;
    sum.grossLoss += d.grossLoss;
    if (d.largestWin !== null && (sum.largestWin === null || d.largestWin > sum.largestWin)) sum.largestWin = d.largestWin;
    if (d.largestLoss !== null && (sum.largestLoss === null || d.largestLoss < sum.largestLoss)) sum.largestLoss = d.largestLoss;
    // Drawdown of cumulative net P&L from the start of the range (0) over its days.
    cumulative += netOf(d);
    if (cumulative > peak) peak = cumulative;
    if (peak - cumulative > drawdown) drawdown = peak - cumulative;
  }
  const decided = BigInt(sum.wins + sum.losses);
  return {
    realizedPnl: money(sum.realized),
    fees: formatScaled(sum.fees, UNIT_PLACES),
    netPnl: money(netOf(sum)),
    roundTrips: sum.roundTrips,
    wins: sum.wins,
    losses: sum.losses,
    winRate: ratio(BigInt(sum.wins), decided),
    profitFactor: ratio(sum.grossWin, -sum.grossLoss),
    expectancy: moneyPer(sum.grossWin + sum.grossLoss, BigInt(sum.roundTrips)),
    averageWin: moneyPer(sum.grossWin, BigInt(sum.wins)),
    averageLoss: moneyPer(sum.grossLoss, BigInt(sum.losses)),
    largestWin: sum.largestWin === null ? null : money(sum.largestWin),
    largestLoss: sum.largestLoss === null ? null : money(sum.largestLoss),
    maxDrawdown: money(knownDrawdown ?? drawdown),
    averageR: risk.rCount === 0 ? null : ratio(risk.rSum, BigInt(risk.rCount) * pow10(RATIO_PLACES)),
    expectancyR: ratio(risk.riskNet, risk.riskSum),
  };
}

const dayDto = (d: DayFigures): JournalDto['days'][number] => ({
  tradingDay: d.tradingDay,
  realizedPnl: money(d.realized),
  fees: formatScaled(d.fees, UNIT_PLACES),
  netPnl: money(netOf(d)),
  fills: d.fills,
  roundTrips: d.roundTrips,
  wins: d.wins,
  losses: d.losses,
});

/** The journal response from a range's days, its open positions and the all-time net P&L. */
export function journalOf(input: JournalInput): JournalDto {
  return {
    accountId: input.accountId,
    currency: input.currency,
    from: input.from,
    to: input.to,
    totals: totalsOf(input.days, input.risk),
    days: input.days.map(dayDto),
    openPositions: [...input.positions]
      .filter((p) => p.quantity !== 0n)
      .sort((a, b) => (a.symbol < b.symbol ? -1 : a.symbol > b.symbol ? 1 : 0))
      .map((p) => ({
        symbol: p.symbol,
        quantity: formatScaled(p.quantity, UNIT_PLACES),
        // cost (10^-16) / quantity (10^-8) = price in 10^-8.
        averagePrice: formatScaled(divHalfEven(p.cost, p.quantity < 0n ? -p.quantity : p.quantity), UNIT_PLACES),
        openedAt: new Date(p.openedAt).toISOString(),
      })),
    balance: balanceOf(input.startingBalance, input.allTimeNet),
  };
}

/** DESIGN §14: startingBalance + all-time net P&L, as money. */
export const balanceOf = (startingBalance: string, allTimeNet: bigint): string => money(scaledFrom(startingBalance, AMOUNT_PLACES) + allTimeNet);
