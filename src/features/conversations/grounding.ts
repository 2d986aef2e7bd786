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

const MONTH = '(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)';
const SIGN = '[-+\u2212]';
/** A euro amount written with a decimal comma: a `,` then 1–2 digits and no further digit (`12,5`, `1.234,56`). */
const COMMA_DECIMAL = '(?:\\d{1,3}(?:\\.\\d{3})+|\\d+),\\d{1,2}(?!\\d)';
/** Any other number: `,` groups of three with an optional `.` fraction, or a plain decimal. */
const NUMBER = '(?:\\d{1,3}(?:,\\d{3})+(?:\\.\\d+)?|\\d+(?:\\.\\d+)?|\\.\\d+)';
/** Nothing but a figure's end may follow it: no letter or digit, no further decimal part, no `-word` (`50-day`). */
const FIGURE_END = '(?![\\p{L}\\p{N}_]|[.,]\\d|-\\p{L})';

/**
 * One pass over the text. Each alternative is tried in order at each place; the first ones consume
 * what is not a figure (so no figure is found inside them), the `fig` ones are figures, the last ones
 * consume words and digit-led words (`NQZ5`, `3rd`, `10x`) whole.
 */
const SCAN = new RegExp(
  [
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
    // Month-name dates: Nov 28(th)(, 2026), 28 November 2026.
    `${MONTH}\\.?\\s+\\d{1,2}(?:st|nd|rd|th)?(?![\\p{L}\\p{N}])(?:,?\\s+\\d{4}(?!\\d))?`,
    `\\d{1,2}(?:st|nd|rd|th)?\\s+${MONTH}(?![\\p{L}])(?:,?\\s+\\d{4}(?!\\d))?`,
    // Index names.
    'S&P\\s?500|Nasdaq[- ]?100|Russell\\s?2000|FTSE\\s?100|DAX\\s?40',
    // A euro amount with a decimal comma: €12,50, -€1.234,5, 12,5 €, (€120,50).
    `(?<![\\p{L}\\p{N}_.,#])(?<eu>\\(?${SIGN}?(?:€\\s?${SIGN}?${COMMA_DECIMAL}[kKMB]?|${COMMA_DECIMAL}[kKMB]?\\s?€)\\)?)${FIGURE_END}`,
    // Any other figure: sign, currency, number, then a k/M/B scale, a percent sign, an R or a trailing €.
    `(?<![\\p{L}\\p{N}_.,#])(?<fig>\\(?${SIGN}?(?:[$€£¥]\\s?${SIGN}?)?${NUMBER}(?:[kKMB]|\\s?%|R|\\s?€)?\\)?)${FIGURE_END}`,
    // Words, identifiers and tickers; digit-led words that are no figure.
    '[\\p{L}_][\\p{L}\\p{N}_]*',
    '\\p{N}[\\p{L}\\p{N}_.]*',
  ].join('|'),
  'gmu',
);

const SCALE: Readonly<Record<string, number>> = { k: 3, K: 3, M: 6, B: 9 };
const YEAR = /^(?:19|20)\d\d$/;
/** Beyond this many significant digits a figure's integer key is no longer exact in a double. */
const MAX_DIGITS = 15;

/** The figures of `text`, in order. */
export function findFigures(text: string): Figure[] {
  const figures: Figure[] = [];
  SCAN.lastIndex = 0;
  for (let m = SCAN.exec(text); m !== null; m = SCAN.exec(text)) {
    const groups = m.groups;
    const written = groups?.['eu'] ?? groups?.['fig'];
    if (written === undefined) continue;
    const figure = figureOf(written, m.index, groups?.['eu'] !== undefined);
    if (figure !== undefined) figures.push(figure);
  }
  return figures;
}

function figureOf(written: string, at: number, commaDecimal: boolean): Figure | undefined {
  let start = at;
  let end = at + written.length;
  // Parentheses are the accounting negative only as a pair around an amount with no sign and no `%`; else prose.
  const open = written.startsWith('(');
  const close = written.endsWith(')');
  const accounting = open && close && !/[-+\u2212%]/.test(written);
  if (open && !accounting) start++;
  if (close && !accounting) end--;
  const span = written.slice(start - at, end - at);
  const digits = /[\d.,]*\d/.exec(span)?.[0];
  if (digits === undefined) return undefined;
  const after = span.slice(span.indexOf(digits) + digits.length);
  const suffix = after.replace(/[\s)]/g, '');
  // A bare four-digit integer from 1900 to 2099 is a year.
  if (digits === span && YEAR.test(digits)) return undefined;
  const decimalMark = commaDecimal ? ',' : '.';
  const point = digits.lastIndexOf(decimalMark);
  const whole = (point === -1 ? digits : digits.slice(0, point)).replace(/[.,]/g, '');
  const fraction = point === -1 ? '' : digits.slice(point + 1);
  const all = (whole + fraction).replace(/^0+(?=\d)/, '');
  if (all.length > MAX_DIGITS) return undefined;
  return {
    text: span,
    start,
    end,
    key: Number(all),
    exponent: fraction.length - (SCALE[suffix] ?? 0),
    percent: suffix === '%',
  };
}

/** A turn's source values, held as rounded integers per exponent (built on the first figure that asks). */
class Sources {
  readonly #values: { value: number; toolCallId: string | null }[] = [];
  readonly #byExponent = new Map<number, Map<number, string | null>>();

  add(value: number, toolCallId: string | null): void {
    if (Number.isFinite(value)) this.#values.push({ value: Math.abs(value), toolCallId });
  }

  /** The source of a value that rounds to `key` at `exponent`: the first tool call that held it, else the user (null); undefined: none. */
  find(key: number, exponent: number): string | null | undefined {
    let table = this.#byExponent.get(exponent);
    if (table === undefined) this.#byExponent.set(exponent, (table = this.#table(exponent)));
    return table.get(key);
  }

  #table(exponent: number): Map<number, string | null> {
    const table = new Map<number, string | null>();
    const put = (key: number, id: string | null): void => {
      if (!table.has(key)) table.set(key, id);
    };
    for (const { value, toolCallId } of this.#values) {
      const scaled = exponent >= 0 ? value * 10 ** exponent : value / 10 ** -exponent;
      const floor = Math.floor(scaled);
      const rest = scaled - floor;
      // A value at (or a float's breadth from) a half rounds either way: a model may round half up or to even.
      if (Math.abs(rest - 0.5) < 1e-9) {
        put(floor, toolCallId);
        put(floor + 1, toolCallId);
      } else {
        put(rest < 0.5 ? floor : floor + 1, toolCallId);
      }
    }
    return table;
  }
}

const NUMERIC = /^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$/;

/** Every number of a tool result (numbers and numeric strings, at any depth). */
function addJson(sources: Sources, value: unknown, toolCallId: string): void {
  if (typeof value === 'number') sources.add(value, toolCallId);
  else if (typeof value === 'string') {
    if (NUMERIC.test(value)) sources.add(Number(value), toolCallId);
  } else if (Array.isArray(value)) {
    for (const v of value) addJson(sources, v, toolCallId);
  } else if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) addJson(sources, v, toolCallId);
  }
}

/** The value a figure of the user's text stands for (`1.2M` → 1,200,000; `12%` → 12). */
const valueOf = (f: Figure): number => (f.exponent >= 0 ? f.key / 10 ** f.exponent : f.key * 10 ** -f.exponent);

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
