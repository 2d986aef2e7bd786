// DESIGN §14 position_size: how many shares risk r % of a balance between an entry and a stop, exact.
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
  readonly positionValue: string;
  readonly balance: string;
}

/**
 * riskAmount = balance × r / 100, perShareRisk = |entry − stop|, shares = floor(riskAmount / perShareRisk)
 * (0 when the balance is not positive), positionValue = shares × entry; computed exactly, written half to
 * even at 8 places. Undefined when entry equals stop (no risk per share).
 */
export function positionSize(entry: Exact, stop: Exact, riskPercent: Exact, balance: Exact): PositionSize | undefined {
  const p = Math.max(entry.places, stop.places);
  const perShare = at(entry, p) - at(stop, p);
  const perShareRisk: Exact = { units: perShare < 0n ? -perShare : perShare, places: p };
  if (perShareRisk.units === 0n) return undefined;
  // riskAmount = balance.units × r.units / 10^(b + r + 2)
  const riskAmount: Exact = { units: balance.units * riskPercent.units, places: balance.places + riskPercent.places + 2 };
  const q =
    riskAmount.places >= p
      ? riskAmount.units / (perShareRisk.units * pow10(riskAmount.places - p))
      : (riskAmount.units * pow10(p - riskAmount.places)) / perShareRisk.units;
  const shares = q > 0n ? q : 0n;
  return {
    shares: shares.toString(),
    riskAmount: write(riskAmount),
    perShareRisk: write(perShareRisk),
    positionValue: write({ units: shares * entry.units, places: entry.places }),
    balance: write(balance),
  };
}
