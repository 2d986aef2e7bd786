// DESIGN §18: the figures of a reply matched to the data its turn saw — the values of the turn's tool
// results and the figures of the user's own message. The forms, the rounding rule and what is not a
// figure: docs/decisions/grounding.md.
import type { StoredPart } from './parts.ts';

interface GroundingSpan {
  readonly text: string;
  readonly start: number;
  readonly end: number;
}

interface GroundingSource extends GroundingSpan {
  /** The tool call whose result held the value; null: the user's own message. */
  readonly toolCallId: string | null;
}

/** What `done`, the stored reply and `snapshot` carry (offsets in UTF-16 code units into `content`, `end` exclusive). */
export interface Grounding {
  readonly figures: number;
  readonly matched: number;
  readonly unmatched: GroundingSpan[];
  readonly sources: GroundingSource[];
}

/**
 * A figure as written: `key` is its digits as an integer, `exponent` how many decimal places that
 * integer is scaled by (its decimals, less 3/6/9 for a k/M/B suffix): `1,234.56` → 123456 at 2,
 * `1.2M` → 12 at −5. `percent`: it also matches a ratio × 100.
 */
interface Figure extends GroundingSpan {
  readonly key: number;
  readonly exponent: number;
  readonly percent: boolean;
}

/** Letters, for what borders a figure (Latin, Greek, Cyrillic), as ranges: the `u` flag's property classes made the scan several times slower. */
const L = 'A-Za-z\\u00C0-\\u024F\\u0370-\\u03FF\\u0400-\\u04FF';
const SIGN = '[-+\\u2212]';
/** A euro amount written with a decimal comma: a `,` then 1–2 digits and no further digit (`12,5`, `1.234,56`). */
const COMMA_DECIMAL = '(?:\\d{1,3}(?:\\.\\d{3})+|\\d+),\\d{1,2}(?!\\d)';
/** Any other number: `,` groups of three with an optional `.` fraction, or a plain decimal. */
const NUMBER = '(?:\\d{1,3}(?:,\\d{3})+(?:\\.\\d+)?|\\d+(?:\\.\\d+)?|\\.\\d+)';
/** What may not come just before a figure: a letter, digit, `_`, `.`, `,` or `#`. */
const FIGURE_START = `(?<![${L}0-9_.,#])`;
/** Nothing but a figure's end may follow it: no letter or digit, no further decimal part, no `-word` (`50-day`). */
const FIGURE_END = `(?![${L}0-9_]|[.,]\\d|-[${L}])`;

/**
 * One pass over the text. Each alternative is tried in order at each place: words and identifiers
 * (`NQZ5`, `Q3`) are consumed whole first, so no figure is found inside them; then what is not a figure
 * (list numbers, dates, times); then the figures (group 1: a decimal-comma euro amount, group 2: any
 * other); last, digit-led words (`3rd`, `10x`).
 * Month-name dates and index names are told by the words around a figure (`besideWords`).
 */
const SCAN = new RegExp(
  [
    `[${L}_][${L}0-9_]*`,
    // A list number at a line's start: `1.` / `2)` then a blank.
    '^[ \\t]*\\d{1,3}[.)](?=[ \\t])',
    // Dates and date-times: 2026-11-28(T14:30:00Z), 2026-11, 11/28(/2026), 28.11.2026.
    '\\d{4}-\\d{1,2}-\\d{1,2}(?:[T ]\\d{1,2}:\\d{2}(?::\\d{2}(?:\\.\\d+)?)?(?:Z|[+-]\\d{2}:?\\d{2})?)?',
    '\\d{4}-\\d{2}(?!\\d)',
    '\\d{1,4}/\\d{1,2}(?:/\\d{2,4})?(?!\\d)',
    '\\d{1,2}\\.\\d{1,2}\\.\\d{2,4}(?!\\d)',
    // Times and colon ratios: 14:30(:15)( pm), 9:30am, 1:2.5; 9am, 4 pm.
    '\\d+(?:\\.\\d+)?:\\d+(?:\\.\\d+)?(?::\\d{2})?(?:\\s?[AaPp]\\.?[Mm]\\b\\.?)?',
    '\\d{1,2}\\s?(?:am|pm|AM|PM)\\b',
    // A euro amount with a decimal comma: €12,50, -€1.234,5, 12,5 €, (€120,50).
    `${FIGURE_START}(\\(?${SIGN}?(?:€\\s?${SIGN}?${COMMA_DECIMAL}[kKMB]?|${COMMA_DECIMAL}[kKMB]?\\s?€)\\)?)${FIGURE_END}`,
    // Any other figure: sign, currency, number, then a k/M/B scale, a percent sign, an R or a trailing €.
    `${FIGURE_START}(\\(?${SIGN}?(?:[$€£¥]\\s?${SIGN}?)?${NUMBER}(?:[kKMB]|\\s?%|R|\\s?€)?\\)?)${FIGURE_END}`,
    `\\d[${L}0-9_.]*`,
  ].join('|'),
  'gm',
);

const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]{0,6}';
const MONTH_BEFORE = new RegExp(`(?:^|[^${L}])${MONTH}\\.?\\s+$`);
const MONTH_AFTER = new RegExp(`^(?:st|nd|rd|th)?\\s+${MONTH}(?![${L}])`);
const INDEX_BEFORE = /(?:S&P|Nasdaq|Russell|FTSE|DAX)[- ]?$/;

/** A bare integer that is a month-name date's day (`Nov 28`, `28 November`) or an index's name (`S&P 500`). */
function besideWords(text: string, start: number, end: number): boolean {
  const before = text.slice(Math.max(0, start - 12), start);
  return MONTH_BEFORE.test(before) || INDEX_BEFORE.test(before) || MONTH_AFTER.test(text.slice(end, end + 14));
}

const SCALE: Readonly<Record<string, number>> = { k: 3, K: 3, M: 6, B: 9 };
/** Beyond this many significant digits a figure's integer key is no longer exact in a double. */
const MAX_DIGITS = 15;

/** The figures of `text`, in order. */
export function findFigures(text: string): Figure[] {
  const figures: Figure[] = [];
  SCAN.lastIndex = 0;
  for (let m = SCAN.exec(text); m !== null; m = SCAN.exec(text)) {
    // Group 1: a euro amount with a decimal comma; group 2: any other figure; neither: skipped.
    const written = m[1] ?? m[2];
    if (written === undefined) continue;
    const figure = figureOf(written, m.index, m[1] !== undefined);
    if (figure !== undefined && !(figure.bare && besideWords(text, figure.start, figure.end))) figures.push(figure);
  }
  return figures;
}

const ZERO = 48;
const NINE = 57;
const COMMA = 44;
const POINT = 46;

/** A figure from its written form at `at`: its span, its digits as an integer key and its exponent; undefined: a year. */
function figureOf(written: string, at: number, commaDecimal: boolean): (Figure & { bare: boolean }) | undefined {
  // Parentheses are the accounting negative only as a pair around an amount with no sign and no `%`; else prose.
  const open = written.charCodeAt(0) === 40;
  const close = written.charCodeAt(written.length - 1) === 41;
  const accounting = open && close && !/[-+\u2212%]/.test(written);
  const from = open && !accounting ? 1 : 0;
  const to = close && !accounting ? written.length - 1 : written.length;
  const decimalMark = commaDecimal ? COMMA : POINT;
  let i = from;
  while (i < to && !isDigitOrPoint(written.charCodeAt(i))) i++;
  const numberAt = i;
  let key = 0;
  let digits = 0;
  let decimals = -1;
  for (; i < to; i++) {
    const c = written.charCodeAt(i);
    if (c >= ZERO && c <= NINE) {
      key = key * 10 + (c - ZERO);
      if (key > 0) digits++;
      if (decimals >= 0) decimals++;
    } else if (c === decimalMark) decimals = 0;
    else if (c !== COMMA && c !== POINT) break;
  }
  const numberEnd = i;
  let suffix = '';
  for (; i < to; i++) {
    const ch = written[i];
    if (ch !== ' ' && ch !== ')' && ch !== '\t' && ch !== '\u00A0') suffix = ch ?? '';
  }
  const span = written.slice(from, to);
  const bare = numberAt === from && numberEnd === to && decimals === -1;
  // A bare four-digit integer from 1900 to 2099 is a year.
  if (bare && numberEnd - numberAt === 4 && key >= 1900 && key <= 2099) return undefined;
  if (digits > MAX_DIGITS) return undefined;
  return {
    text: span,
    start: at + from,
    end: at + to,
    key,
    exponent: Math.max(decimals, 0) - (SCALE[suffix] ?? 0),
    percent: suffix === '%',
    bare,
  };
}

const isDigitOrPoint = (c: number): boolean => (c >= ZERO && c <= NINE) || c === POINT;

/**
 * A turn's source values, sorted once: a figure finds the values that round to it by a binary search
 * of the interval they lie in, so the check costs (figures + values) × log(values), never their product.
 */
class Sources {
  readonly #added: number[] = [];
  /** Of each value, the first source that held it (tool results come before the user's message). */
  readonly #firstOf = new Map<number, { readonly id: string | null; readonly order: number }>();
  #sorted: Float64Array | undefined;

  add(value: number, toolCallId: string | null): void {
    if (!Number.isFinite(value)) return;
    const v = Math.abs(value);
    if (this.#firstOf.has(v)) return;
    this.#firstOf.set(v, { id: toolCallId, order: this.#added.length });
    this.#added.push(v);
  }

  /** The source of a value that rounds to `key` at `exponent` decimals (the earliest if several); undefined: none. */
  find(key: number, exponent: number): string | null | undefined {
    this.#sorted ??= Float64Array.from(this.#added).sort();
    const sorted = this.#sorted;
    const unit = 10 ** -exponent;
    // Every value that may round to key lies in [key − ½, key + ½] units (a float's breadth wider).
    const lo = (key - 0.5) * unit;
    const hi = (key + 0.5) * unit;
    const slack = Math.max(Math.abs(hi), 1) * 1e-12;
    let best: { readonly id: string | null; readonly order: number } | undefined;
    for (let i = lowerBound(sorted, lo - slack); i < sorted.length; i++) {
      const v = sorted[i] as number;
      if (v > hi + slack) break;
      const first = this.#firstOf.get(v);
      if (first !== undefined && roundsTo(v, exponent, key) && (best === undefined || first.order < best.order)) best = first;
    }
    return best?.id;
  }
}

/** The first index whose value is ≥ x. */
function lowerBound(sorted: Float64Array, x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Whether `value` rounded at `exponent` decimals is `key`. A value at (or a float's breadth from) a
 * half rounds either way: a model may round half up or half to even.
 */
function roundsTo(value: number, exponent: number, key: number): boolean {
  const scaled = exponent >= 0 ? value * 10 ** exponent : value / 10 ** -exponent;
  const floor = Math.floor(scaled);
  const rest = scaled - floor;
  if (Math.abs(rest - 0.5) < 1e-9) return key === floor || key === floor + 1;
  return key === (rest < 0.5 ? floor : floor + 1);
}

const NUMERIC = /^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$/;

/** Every number of a tool result (numbers and numeric strings, at any depth). */
function addJson(sources: Sources, value: unknown, toolCallId: string): void {
  if (typeof value === 'number') sources.add(value, toolCallId);
  else if (typeof value === 'string') {
    // Most strings (names, ids, dates) are told apart by their first character before the pattern is tried.
    const c = value.charCodeAt(0);
    if (((c >= ZERO && c <= NINE) || c === 45 || c === 43 || c === POINT) && NUMERIC.test(value)) sources.add(Number(value), toolCallId);
  } else if (Array.isArray(value)) {
    for (const v of value) addJson(sources, v, toolCallId);
  } else if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    for (const k in record) addJson(sources, record[k], toolCallId);
  }
}

/** The value a figure of the user's text stands for (`1.2M` → 1,200,000; `12%` → 12). */
const valueOf = (f: Figure): number => (f.exponent >= 0 ? f.key / 10 ** f.exponent : f.key * 10 ** -f.exponent);

/**
 * A grounding read back from the reply's row (jsonb keeps an object's keys in an order of its own) in
 * the order groundReply builds it, so that a frame rebuilt from a stored reply is byte for byte the one
 * the turn's clients were sent under the same id (DESIGN §12).
 */
export function groundingAsBuilt(g: Grounding): Grounding {
  const span = (s: GroundingSpan): GroundingSpan => ({ text: s.text, start: s.start, end: s.end });
  const source = (s: GroundingSource): GroundingSource => ({ ...span(s), toolCallId: s.toolCallId });
  return { figures: g.figures, matched: g.matched, unmatched: g.unmatched.map(span), sources: g.sources.map(source) };
}

/**
 * DESIGN §18: the figures of `content` and which of them a source holds. A figure matches when it
 * equals, in absolute value, a source value rounded to the figure's own decimals (scaled by its k/M/B;
 * a percentage also as a ratio × 100). Sources: the values of the turn's successful tool results,
 * then the figures of the user's message.
 */
export function groundReply(content: string, parts: readonly StoredPart[], userText: string): Grounding {
  const figures = findFigures(content);
  if (figures.length === 0) return { figures: 0, matched: 0, unmatched: [], sources: [] };
  const sources = new Sources();
  for (const part of parts) if (part.type === 'tool_result' && part.ok) addJson(sources, part.result, part.id);
  for (const f of findFigures(userText)) sources.add(valueOf(f), null);
  const unmatched: GroundingSpan[] = [];
  const matched: GroundingSource[] = [];
  for (const f of figures) {
    let id = sources.find(f.key, f.exponent);
    // A percentage of a ratio: ratio × 100 rounded at e decimals is the ratio rounded at e + 2.
    if (id === undefined && f.percent) id = sources.find(f.key, f.exponent + 2);
    const span = { text: f.text, start: f.start, end: f.end };
    if (id === undefined) unmatched.push(span);
    else matched.push({ ...span, toolCallId: id });
  }
  return { figures: figures.length, matched: matched.length, unmatched, sources: matched };
}
