// The journal's figures as a trader reads them. Every amount arrives as a canonical decimal string
// (DESIGN §14) and is only ever *formatted*: Intl.NumberFormat takes the string itself and rounds it as a
// decimal (no binary float between the service's figure and the screen). Nothing here adds money up.

type Numeric = `${number}`;

const digitsCache = new Map<string, number>();

/** The currency's minor-unit digits (USD 2, JPY 0, …), 2 for a code Intl does not know. */
function currencyDigits(currency: string): number {
  const code = currency.toUpperCase();
  let d = digitsCache.get(code);
  if (d === undefined) {
    try {
      d = new Intl.NumberFormat('en', { style: 'currency', currency: code }).resolvedOptions().maximumFractionDigits ?? 2;
    } catch {
      d = 2;
    }
    digitsCache.set(code, d);
  }
  return d;
}

/** A decimal string as the service writes it (`-12.5`, `0`, `1234.00000001`), or undefined. */
const DECIMAL = /^-?\d+(?:\.\d+)?$/;
export const isDecimal = (text: unknown): text is string => typeof text === 'string' && DECIMAL.test(text);

/** -1, 0 or 1, read from the digits. */
export function signOf(text: string): -1 | 0 | 1 {
  if (/^-?0*(?:\.0*)?$/.test(text)) return 0;
  return text.startsWith('-') ? -1 : 1;
}

/** Fractional digits that are not trailing zeros. */
function placesOf(text: string): number {
  const dot = text.indexOf('.');
  return dot < 0 ? 0 : text.slice(dot + 1).replace(/0+$/, '').length;
}

const formatters = new Map<string, Intl.NumberFormat>();
function formatter(key: string, make: () => Intl.NumberFormat): Intl.NumberFormat {
  let f = formatters.get(key);
  if (!f) {
    f = make();
    formatters.set(key, f);
  }
  return f;
}

export interface MoneyText {
  /** As shown: the account's currency at its minor digits (rounded half to even when the figure has more). */
  readonly text: string;
  /** The figure as the service wrote it. */
  readonly exact: string;
  /** False when the shown text is rounded (the figure has more fractional digits than the currency). */
  readonly isExact: boolean;
  readonly sign: -1 | 0 | 1;
}

/** An amount in the account's currency; `signed` writes `+` on a gain (P&L), never on zero. */
export function money(text: string, currency: string, opts: { signed?: boolean } = {}): MoneyText {
  const code = currency.toUpperCase();
  const digits = currencyDigits(code);
  const f = formatter(`money:${code}:${opts.signed ? 's' : ''}`, () => {
    try {
      return new Intl.NumberFormat(undefined, {
        style: 'currency',
        currency: code,
        minimumFractionDigits: digits,
        maximumFractionDigits: digits,
        roundingMode: 'halfEven',
        signDisplay: opts.signed ? 'exceptZero' : 'auto',
      });
    } catch {
      return new Intl.NumberFormat(undefined, {
        minimumFractionDigits: digits,
        maximumFractionDigits: digits,
        roundingMode: 'halfEven',
        signDisplay: opts.signed ? 'exceptZero' : 'auto',
      });
    }
  });
  return { text: f.format(text as Numeric), exact: text, isExact: placesOf(text) <= digits, sign: signOf(text) };
}

/** A plain decimal (a quantity, a price) with every digit the service wrote, grouped for reading. */
export function decimal(text: string): string {
  const f = formatter('decimal', () => new Intl.NumberFormat(undefined, { maximumFractionDigits: 8 }));
  return isDecimal(text) ? f.format(text as Numeric) : text;
}

/**
 * A price in the instrument's own precision: every digit the service wrote (0.0012 stays 0.0012),
 * grouped, with the currency; padded to the currency's minor digits, never rounded.
 */
export function price(text: string, currency: string): string {
  if (!isDecimal(text)) return text;
  const code = currency.toUpperCase();
  const digits = Math.min(20, Math.max(currencyDigits(code), placesOf(text)));
  const f = formatter(`price:${code}:${digits}`, () => {
    const opts = { minimumFractionDigits: Math.min(digits, currencyDigits(code)), maximumFractionDigits: digits };
    try {
      return new Intl.NumberFormat(undefined, { ...opts, style: 'currency', currency: code });
    } catch {
      return new Intl.NumberFormat(undefined, opts);
    }
  });
  return f.format(text as Numeric);
}

/** An amount in a calendar cell: three figures, compact and signed ("+$98", "+$412", "-$1.23K"); the exact figure is a click away. */
export function compactMoney(text: string, currency: string): string {
  const code = currency.toUpperCase();
  const f = formatter(`compact:${code}`, () => {
    const opts = { notation: 'compact', maximumSignificantDigits: 3, signDisplay: 'exceptZero', roundingMode: 'halfEven' } as const;
    try {
      return new Intl.NumberFormat(undefined, { ...opts, style: 'currency', currency: code });
    } catch {
      return new Intl.NumberFormat(undefined, opts);
    }
  });
  return isDecimal(text) ? f.format(text as Numeric) : text;
}

/** What a fill or a round trip is when it is not a plain stock: "future ×50", "option ×100" ('' for a stock at ×1). */
export function instrument(assetClass: string | undefined, multiplier: string | undefined): string {
  const m = multiplier && isDecimal(multiplier) && multiplier !== '1' ? ` ×${decimal(multiplier)}` : '';
  if ((assetClass === undefined || assetClass === 'stock') && !m) return '';
  return `${assetClass ?? 'stock'}${m}`;
}

/** An R multiple, signed: "+4.075R", "-1R", "—" without a planned stop. */
export function rMultiple(text: string | null): string {
  if (text === null || !isDecimal(text)) return '—';
  const f = formatter('r', () => new Intl.NumberFormat(undefined, { maximumFractionDigits: 4, signDisplay: 'exceptZero' }));
  return `${f.format(text as Numeric)}R`;
}

/** A holding time in its two largest units: "45s", "12m 5s", "3h 20m", "2d 4h". */
export function holdTime(seconds: number): string {
  const units = [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
    ['s', 1],
  ] as const;
  const parts: string[] = [];
  let rest = Math.max(0, Math.floor(seconds));
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n > 0 || (parts.length > 0 && parts.length < 2)) parts.push(`${n}${name}`);
    if (parts.length === 2) break;
  }
  return parts.length === 0 ? '0s' : parts.filter((p, i) => i === 0 || !p.startsWith('0')).join(' ');
}

/** A ratio in [0, 1] (win rate) as a percentage: "0.6667" → "66.67%". */
export function percent(text: string | null): string {
  if (text === null || !isDecimal(text)) return '—';
  const f = formatter('percent', () => new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 2 }));
  return f.format(text as Numeric);
}

/** Compact money for an axis label ("$1.2K", "−$350"); the value comes from the axis, never a sum of figures. */
export function axisMoney(value: number, currency: string): string {
  const code = currency.toUpperCase();
  const f = formatter(`axis:${code}`, () => {
    try {
      return new Intl.NumberFormat(undefined, { style: 'currency', currency: code, notation: 'compact', maximumFractionDigits: 1 });
    } catch {
      return new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
    }
  });
  return f.format(value);
}

const dayFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' });
/** A trading day (YYYY-MM-DD, a calendar date, no zone) in words: "Mar 4, 2026". */
export function day(text: string): string {
  const t = Date.parse(`${text}T00:00:00Z`);
  return Number.isFinite(t) ? dayFormat.format(t) : text;
}

const zoned = new Map<string, Intl.DateTimeFormat>();
function zonedFormat(timeZone: string, withDate: boolean): Intl.DateTimeFormat {
  const key = `${withDate ? 'd' : 't'}:${timeZone}`;
  let f = zoned.get(key);
  if (!f) {
    const opts: Intl.DateTimeFormatOptions = withDate ? { dateStyle: 'medium', timeStyle: 'short' } : { timeStyle: 'medium' };
    try {
      f = new Intl.DateTimeFormat(undefined, { ...opts, timeZone });
    } catch {
      f = new Intl.DateTimeFormat(undefined, { ...opts, timeZone: 'UTC' });
    }
    zoned.set(key, f);
  }
  return f;
}

/** The time of day of an instant in the account's zone ("2:05:09 PM"), the zone its trading day is counted in. */
export function timeIn(iso: string, timeZone: string): string {
  const t = Date.parse(iso);
  return Number.isFinite(t) ? zonedFormat(timeZone, false).format(t) : iso;
}

/** An instant's date and time in the account's zone. */
export function dateTimeIn(iso: string, timeZone: string): string {
  const t = Date.parse(iso);
  return Number.isFinite(t) ? zonedFormat(timeZone, true).format(t) : iso;
}

/** Days added to a YYYY-MM-DD date (calendar arithmetic, UTC). */
export function addDays(text: string, n: number): string {
  return new Date(Date.parse(`${text}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);
}

/** Orders two decimal strings by their digits (exact at any length, unlike a float). */
export function compareDecimal(a: string, b: string): number {
  const sa = signOf(a);
  const sb = signOf(b);
  if (sa !== sb) return sa - sb;
  if (sa === 0) return 0;
  const m = compareMagnitude(a.replace('-', ''), b.replace('-', ''));
  return sa > 0 ? m : -m;
}

function compareMagnitude(a: string, b: string): number {
  const [ai = '', af = ''] = a.split('.');
  const [bi = '', bf = ''] = b.split('.');
  const ia = ai.replace(/^0+/, '');
  const ib = bi.replace(/^0+/, '');
  if (ia.length !== ib.length) return ia.length - ib.length;
  if (ia !== ib) return ia < ib ? -1 : 1;
  const n = Math.max(af.length, bf.length);
  const fa = af.padEnd(n, '0');
  const fb = bf.padEnd(n, '0');
  return fa === fb ? 0 : fa < fb ? -1 : 1;
}
