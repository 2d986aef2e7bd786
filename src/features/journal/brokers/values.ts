// DESIGN §17: the values broker files write, read into the forms the journal's checks take — plain
// decimals and ISO 8601 times (with an offset when the file gives one, a wall-clock time when not).

/** A number as brokers write it: `$1,234.50`, `(12.5)`, `-3`, `+100`, `@187.5`, `1.234,56` with decimal commas. */
export interface Amount {
  readonly negative: boolean;
  /** Plain decimal text, no sign, no grouping, no trailing fractional zeros. */
  readonly digits: string;
}

/**
 * `decimalComma` (a `;`-delimited file, as European spreadsheets write them): `,` is the decimal
 * point and `.` groups thousands (`12,5`, `1.234,56`, `1.234`); a number with one `.` and no `,`
 * that is not one thousands group (`4750.25`, `0.5`) keeps `.` as its point, so a US file saved
 * with `;` keeps its prices. Otherwise (`,`-delimited and tab files) `,` only groups thousands (a quoted
 * `"1,234.50"`). Grouping must be well formed (`1,234,567`): `12,5` in a `,` file is not a number,
 * never 125. Undefined when the text is not a number.
 */
export function amountOf(text: string | undefined, decimalComma = false): Amount | undefined {
  if (text === undefined) return undefined;
  let t = text.trim().replace(/[\s$€£¥@]/g, '');
  let negative = false;
  if (/^\(.*\)$/.test(t)) {
    negative = true;
    t = t.slice(1, -1);
  }
  if (t.startsWith('-') || t.startsWith('+')) {
    negative = negative !== t.startsWith('-');
    t = t.slice(1);
  }
  const plain = ungrouped(t, decimalComma);
  if (plain === undefined || !/^(\d+(\.\d*)?|\.\d+)$/.test(plain)) return undefined;
  let [whole = '', fraction = ''] = plain.split('.');
  whole = whole.replace(/^0+(?=\d)/, '') || '0';
  fraction = fraction.replace(/0+$/, '');
  const digits = fraction === '' ? whole : `${whole}.${fraction}`;
  return { negative: negative && digits !== '0', digits };
}

/** A number's text with its grouping removed and `.` as its decimal point, or undefined when the grouping is malformed. */
function ungrouped(t: string, decimalComma: boolean): string | undefined {
  if (decimalComma && !t.includes(',') && /^\d*\.\d*$/.test(t) && !/^\d{1,3}\.\d{3}$/.test(t)) return t;
  const [group, point, grouped]: [string, string, RegExp] = decimalComma ? ['.', ',', /^\d{1,3}(\.\d{3})+$/] : [',', '.', /^\d{1,3}(,\d{3})+$/];
  const [whole = '', fraction, ...more] = t.split(point);
  if (more.length > 0 || (whole.includes(group) && !grouped.test(whole))) return undefined;
  const digits = whole.replaceAll(group, '');
  return fraction === undefined ? digits : `${digits}.${fraction}`;
}

/** The absolute value as text (a fee written negative is still the fee), or undefined. */
export const absolute = (text: string | undefined, decimalComma = false): string | undefined => amountOf(text, decimalComma)?.digits;

/** Zone abbreviations brokers print after a time (Webull), as offsets. */
const ZONES: Readonly<Record<string, string>> = {
  UTC: '+00:00',
  GMT: '+00:00',
  Z: '+00:00',
  EST: '-05:00',
  EDT: '-04:00',
  CST: '-06:00',
  CDT: '-05:00',
  MST: '-07:00',
  MDT: '-06:00',
  PST: '-08:00',
  PDT: '-07:00',
  BST: '+01:00',
  CET: '+01:00',
  CEST: '+02:00',
  HKT: '+08:00',
  JST: '+09:00',
};

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

function offsetOf(zone: string | undefined): string | undefined | null {
  if (zone === undefined || zone === '') return undefined;
  const named = ZONES[zone.toUpperCase()];
  if (named !== undefined) return named;
  const m = /^([+-])(\d{2}):?(\d{2})$/.exec(zone);
  return m ? `${m[1]}${m[2]}:${m[3]}` : null;
}

/** Which of day and month comes first in a slash date (`1/5/24`). */
export type DateOrder = 'month-first' | 'day-first';

interface Parts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  ms: number;
  zone: string | undefined;
}

const FORMS: readonly { re: RegExp; parts: (m: RegExpExecArray, order: DateOrder) => Parts | undefined }[] = [
  // ISO 8601 and its relatives: `2024-01-05T10:30:00.123-05:00`, `2024-01-05 10:30:00`, IBKR's `2024-01-05, 10:30:00`.
  {
    re: /^(\d{4})-(\d{2})-(\d{2})(?:[T ]|,\s*)(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?\s*(Z|[+-]\d{2}:?\d{2}|[A-Za-z]{2,4})?$/,
    parts: (m) => ({ year: +(m[1] ?? 0), month: +(m[2] ?? 0), day: +(m[3] ?? 0), ...clock(m, 4) }),
  },
  // Interactive Brokers: `20240105;103000`, `20240105 103000`, `20240105,10:30:00`.
  {
    re: /^(\d{4})(\d{2})(\d{2})[;, ]\s*(\d{2}):?(\d{2}):?(\d{2})()()$/,
    parts: (m) => ({ year: +(m[1] ?? 0), month: +(m[2] ?? 0), day: +(m[3] ?? 0), ...clock(m, 4) }),
  },
  // MetaTrader: `2024.01.05 10:30:00`.
  {
    re: /^(\d{4})\.(\d{2})\.(\d{2})\s+(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?()$/,
    parts: (m) => ({ year: +(m[1] ?? 0), month: +(m[2] ?? 0), day: +(m[3] ?? 0), ...clock(m, 4) }),
  },
  // European dotted dates: `05.01.2024 10:30:00`.
  {
    re: /^(\d{1,2})\.(\d{1,2})\.(\d{4})\s+(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?()$/,
    parts: (m) => ({ year: +(m[3] ?? 0), month: +(m[2] ?? 0), day: +(m[1] ?? 0), ...clock(m, 4) }),
  },
  // Slash dates, 2- or 4-digit years, 24- or 12-hour clocks, an optional zone: `1/5/24 10:30:00`, `01/05/2024 10:30:01 AM EST`.
  {
    re: /^(\d{1,2})\/(\d{1,2})\/(\d{2}|\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:\s*([AaPp][Mm]))?(?:\s+([A-Za-z]{2,4}|[+-]\d{2}:?\d{2}))?$/,
    parts: (m, order) => {
      const a = +(m[1] ?? 0);
      const b = +(m[2] ?? 0);
      const y = +(m[3] ?? 0);
      const c = clock(m, 4, 9);
      const meridiem = m[8]?.toUpperCase();
      if (meridiem !== undefined) {
        if (c.hour < 1 || c.hour > 12) return undefined;
        c.hour = (c.hour % 12) + (meridiem === 'PM' ? 12 : 0);
      }
      return { year: y < 100 ? 2000 + y : y, month: order === 'day-first' ? b : a, day: order === 'day-first' ? a : b, ...c };
    },
  },
];

function clock(m: RegExpExecArray, at: number, zoneGroup = at + 4): Omit<Parts, 'year' | 'month' | 'day'> {
  const zone = m[zoneGroup];
  return {
    hour: +(m[at] ?? 0),
    minute: +(m[at + 1] ?? 0),
    second: +(m[at + 2] || 0),
    ms: +((m[at + 3] ?? '') + '000').slice(0, 3),
    zone: zone === '' ? undefined : zone,
  };
}

/** The first number of a slash date (`13/01/2024` → 13), to tell a file's date order. */
export function leadingSlashNumbers(text: string): [number, number] | undefined {
  const m = /^\s*(\d{1,2})\/(\d{1,2})\//.exec(text);
  return m ? [+(m[1] ?? 0), +(m[2] ?? 0)] : undefined;
}

/**
 * A broker's time as ISO 8601: with its offset when it names one, else the wall-clock time
 * (`2024-01-05T10:30:00`) that the import reads in the account's zone. Undefined when it is not a
 * time this reader knows or not a real calendar time.
 */
export function isoTime(text: string, order: DateOrder = 'month-first'): string | undefined {
  const t = text.trim();
  for (const form of FORMS) {
    const m = form.re.exec(t);
    if (!m) continue;
    const p = form.parts(m, order);
    if (p === undefined) return undefined;
    const offset = offsetOf(p.zone);
    if (offset === null) return undefined;
    const d = new Date(Date.UTC(p.year, p.month - 1, p.day));
    if (d.getUTCFullYear() !== p.year || d.getUTCMonth() !== p.month - 1 || d.getUTCDate() !== p.day) return undefined;
    if (p.hour > 23 || p.minute > 59 || p.second > 59) return undefined;
    const wall = `${pad(p.year, 4)}-${pad(p.month)}-${pad(p.day)}T${pad(p.hour)}:${pad(p.minute)}:${pad(p.second)}${p.ms ? `.${pad(p.ms, 3)}` : ''}`;
    return offset === undefined ? wall : `${wall}${offset === '+00:00' ? 'Z' : offset}`;
  }
  return undefined;
}

/** The exact sum of plain non-negative decimals (at most 8 places), or undefined when none is given. */
export function addAmounts(values: readonly (string | undefined)[]): string | undefined {
  const given = values.filter((v): v is string => v !== undefined && v !== '');
  if (given.length === 0) return undefined;
  const units = given.reduce((sum, v) => {
    const [whole = '0', fraction = ''] = v.split('.');
    return sum + BigInt(whole + fraction.padEnd(8, '0').slice(0, 8));
  }, 0n);
  const text = units.toString().padStart(9, '0');
  const fraction = text.slice(-8).replace(/0+$/, '');
  return fraction === '' ? text.slice(0, -8) : `${text.slice(0, -8)}.${fraction}`;
}
