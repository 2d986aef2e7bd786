// Exact decimals as scaled BigInts (DESIGN §14: never a binary float on the way). A value is an
// integer count of 10^-scale: quantities, prices, fees and multipliers at 8 places (their input
// precision), costs (price × quantity) at 16, amounts (price × quantity × multiplier, DESIGN §17) at 24,
// so every sum and product is exact; rounding happens once, on the way out.

export const UNIT_PLACES = 8;
export const COST_PLACES = 16;
export const AMOUNT_PLACES = 24;
/** A fee (10^-8) as an amount (10^-24). */
export const FEE_TO_AMOUNT = 10n ** BigInt(AMOUNT_PLACES - UNIT_PLACES);
/** Ratios (win rate, profit factor) are written with 4 fractional digits. */
export const RATIO_PLACES = 4;

const POW10: bigint[] = Array.from({ length: 40 }, (_, i) => 10n ** BigInt(i));
export const pow10 = (n: number): bigint => POW10[n] ?? 10n ** BigInt(n);

/** What a trade's quantity, price or fee may be: at most 12 integer and 8 fractional digits. */
const INPUT_DECIMAL = /^(\d{1,12})(?:\.(\d{1,8}))?$/;

/** A trade decimal (`12.50`, `007`, `0.00000001`) as units of 10^-8, or undefined when it is not one. */
export function parseUnits(text: string): bigint | undefined {
  const m = INPUT_DECIMAL.exec(text);
  if (!m) return undefined;
  return BigInt((m[1] ?? '') + (m[2] ?? '').padEnd(UNIT_PLACES, '0'));
}

/**
 * Any plain decimal string the database writes (`numeric` as text: `-12.3400`, `5`) at `places`
 * fractional digits. A value with more fractional digits than `places` is a programming error.
 */
export function scaledFrom(text: string, places: number): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text);
  if (!m) throw new Error(`not a decimal: ${text}`);
  const fraction = (m[3] ?? '').replace(/0+$/, '');
  if (fraction.length > places) throw new Error(`${text} has more than ${places} fractional digits`);
  const v = BigInt((m[2] ?? '') + fraction.padEnd(places, '0'));
  return m[1] === '-' ? -v : v;
}

/** A scaled value as a canonical decimal: no exponent, no `+`, no trailing fractional zeros, never `-0`. */
export function formatScaled(value: bigint, places: number): string {
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString().padStart(places + 1, '0');
  const whole = digits.slice(0, digits.length - places);
  const fraction = digits.slice(digits.length - places).replace(/0+$/, '');
  const text = fraction === '' ? whole : `${whole}.${fraction}`;
  return negative && text !== '0' ? `-${text}` : text;
}

/** n / d rounded half to even (d ≠ 0). */
export function divHalfEven(n: bigint, d: bigint): bigint {
  if (d < 0n) return divHalfEven(-n, -d);
  const negative = n < 0n;
  const a = negative ? -n : n;
  let q = a / d;
  const twice = (a % d) * 2n;
  if (twice > d || (twice === d && q % 2n === 1n)) q += 1n;
  return negative ? -q : q;
}

/** A value at `from` places written rounded half to even at `to` places (`to` ≤ `from`). */
function rounded(value: bigint, from: number, to: number): string {
  return formatScaled(divHalfEven(value, pow10(from - to)), to);
}

/** An amount (16 places) as the service writes money: half to even at 8 places. */
export const money = (amount: bigint): string => rounded(amount, AMOUNT_PLACES, UNIT_PLACES);

/** n / d in units of 10^-4, half to even (d ≠ 0). */
export const ratioUnits = (n: bigint, d: bigint): bigint => divHalfEven(n * pow10(RATIO_PLACES), d);

/** n / d as a ratio string (4 places, half to even), or null when there is no denominator. */
export function ratio(n: bigint, d: bigint): string | null {
  return d === 0n ? null : formatScaled(ratioUnits(n, d), RATIO_PLACES);
}

/** n / d as money (n at 16 places, d a plain count or 16-place amount ratio), or null when d is 0. */
export function moneyPer(amount: bigint, count: bigint): string | null {
  return count === 0n ? null : formatScaled(divHalfEven(amount, count * pow10(AMOUNT_PLACES - UNIT_PLACES)), UNIT_PLACES);
}

/** The canonical form of a trade decimal, or undefined when it is not one. */
export function canonicalUnits(text: string): string | undefined {
  const v = parseUnits(text);
  return v === undefined ? undefined : formatScaled(v, UNIT_PLACES);
}
