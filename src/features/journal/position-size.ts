// DESIGN §14, §17 position_size: how many shares (contracts) risk r % of a balance between an entry and
// a stop, at the instrument's multiplier, exact; and whether that position is worth more than the balance.
import { divHalfEven, formatScaled, pow10, UNIT_PLACES } from './decimal.ts';

/** A decimal as an exact fraction: `units` / 10^`places`. */
export interface Exact {
  readonly units: bigint;
  readonly places: number;
}

/** A plain decimal string (`-12.5`, `0.0001`) as an exact fraction, or undefined. */
export function exact(text: string): Exact | undefined {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text);
  if (!m) return undefined;
  const fraction = m[3] ?? '';
  const units = BigInt((m[2] ?? '') + fraction);
  return { units: m[1] === '-' ? -units : units, places: fraction.length };
}

const at = (x: Exact, places: number): bigint => x.units * pow10(places - x.places);
const write = (x: Exact): string =>
  x.places <= UNIT_PLACES ? formatScaled(at(x, UNIT_PLACES), UNIT_PLACES) : formatScaled(divHalfEven(x.units, pow10(x.places - UNIT_PLACES)), UNIT_PLACES);

export interface PositionSize {
  readonly shares: string;
  readonly riskAmount: string;
  readonly perShareRisk: string;
  readonly multiplier: string;
  readonly positionValue: string;
  readonly balance: string;
  /** The position costs more than the balance (it needs margin or leverage): said, never silent. */
  readonly exceedsBalance: boolean;
}

const ONE: Exact = { units: 1n, places: 0 };

/** a × b, exact. */
const times = (a: Exact, b: Exact): Exact => ({ units: a.units * b.units, places: a.places + b.places });

/**
 * riskAmount = balance × r / 100, perShareRisk = |entry − stop|, shares = floor(riskAmount / (perShareRisk
 * × multiplier)) (0 when the balance is not positive), positionValue = shares × entry × multiplier;
 * computed exactly, written half to even at 8 places. Undefined when entry equals stop (no risk per share).
 */
export function positionSize(entry: Exact, stop: Exact, riskPercent: Exact, balance: Exact, multiplier: Exact = ONE): PositionSize | undefined {
  const p = Math.max(entry.places, stop.places);
  const perShare = at(entry, p) - at(stop, p);
  const perShareRisk: Exact = { units: perShare < 0n ? -perShare : perShare, places: p };
  if (perShareRisk.units === 0n) return undefined;
  const perUnit = times(perShareRisk, multiplier);
  // riskAmount = balance.units × r.units / 10^(b + r + 2)
  const riskAmount: Exact = { units: balance.units * riskPercent.units, places: balance.places + riskPercent.places + 2 };
  const q =
    riskAmount.places >= perUnit.places
      ? riskAmount.units / (perUnit.units * pow10(riskAmount.places - perUnit.places))
      : (riskAmount.units * pow10(perUnit.places - riskAmount.places)) / perUnit.units;
  const shares = q > 0n ? q : 0n;
  const value = times({ units: shares * entry.units, places: entry.places }, multiplier);
  const common = Math.max(value.places, balance.places);
  return {
    shares: shares.toString(),
    riskAmount: write(riskAmount),
    perShareRisk: write(perShareRisk),
    multiplier: write(multiplier),
    positionValue: write(value),
    balance: write(balance),
    exceedsBalance: at(value, common) > at(balance, common),
  };
}
