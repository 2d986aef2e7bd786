// The shape every broker layout shares (DESIGN §17): how it is recognised from the file's records,
// the columns it reads, and its rows as trades, rows it skips, or rows it cannot read.
import type { RawTrade } from '../fields.ts';
import type { DateOrder } from './values.ts';

/** A trade as the file gives it, every field text, already in the forms the journal's checks take (an executedAt without an offset is a wall-clock time). */
export type BrokerTrade = RawTrade;

/**
 * One row of the file: `row` is the layout's 1-based data row (the header not counted, a line of blanks
 * counted, so it is the row a spreadsheet shows below the header); in the multi-section statements
 * (IBKR Activity, thinkorswim) it is the file's 1-based line. A TopstepX round trip gives two trades
 * with one row number.
 */
export type BrokerRow =
  | { readonly row: number; readonly kind: 'trade'; readonly trade: BrokerTrade }
  | { readonly row: number; readonly kind: 'skipped' }
  | { readonly row: number; readonly kind: 'invalid'; readonly message: string };

/** One parsed line of the file: its cells and its 1-based line number. */
export interface FileRecord {
  readonly cells: readonly string[];
  readonly line: number;
}

export interface ReadContext {
  /** The file writes decimal commas (`;`-delimited EU files). */
  readonly decimalComma: boolean;
  readonly dateOrder: DateOrder;
}

export interface Layout {
  readonly id: string;
  readonly name: string;
  /** Where the trader gets the file. */
  readonly how: string;
  /** The columns the layout reads, as the broker names them (the first of each alias group). */
  readonly columns: readonly string[];
  /** What a file needs to be read as this layout, in words (the refusal of a file no layout reads names it). */
  readonly needs: string;
  /** Whether the file is this layout's (its header, or its section titles). */
  detect(records: readonly FileRecord[]): boolean;
  /** Why the file is not readable as this layout (asked with ?format=), or undefined. */
  missing(records: readonly FileRecord[]): string | undefined;
  read(records: readonly FileRecord[], ctx: ReadContext): BrokerRow[];
}

/** How many of a file's first lines may come before its header. */
const HEADER_SEARCH = 20;

/** A header cell as layouts compare it: trimmed, lower case, inner spaces folded. */
export const headerName = (cell: string): string =>
  cell
    .replace(/^\uFEFF/, '')
    .trim()
    .toLowerCase()
    .replace(/\s+/g, ' ');

/** A line of nothing but blanks (every cell empty or spaces). */
export const isBlank = (cells: readonly string[]): boolean => cells.every((c) => c.trim() === '');

/** The columns of a header by name: each field an alias list (compared as headerName does), the first alias present wins. */
export function columnIndex<K extends string>(header: readonly string[], fields: Readonly<Record<K, readonly string[]>>): Partial<Record<K, number>> {
  const names = header.map(headerName);
  const out: Partial<Record<K, number>> = {};
  for (const key of Object.keys(fields) as K[]) {
    for (const alias of fields[key]) {
      const i = names.indexOf(headerName(alias));
      if (i >= 0) {
        out[key] = i;
        break;
      }
    }
  }
  return out;
}

/** A row's cells by field. */
export function cellsOf<K extends string>(
  cells: readonly string[],
  index: Partial<Record<K, number>>,
  keepSpaces: readonly K[] = [],
): (key: K) => string | undefined {
  return (key) => {
    const i = index[key];
    const v = i === undefined ? undefined : cells[i];
    return v === undefined || keepSpaces.includes(key) ? v : v.trim();
  };
}

/**
 * A one-header layout: the first record is the header, every later record a data row numbered from 1.
 * `required` are the fields it cannot do without; `keep` turns a row into a trade, a skip or a problem.
 */
export function tabular<K extends string>(spec: {
  readonly id: string;
  readonly name: string;
  readonly how: string;
  readonly fields: Readonly<Record<K, readonly string[]>>;
  readonly required: readonly NoInfer<K>[];
  /** Header names of which one at least must be there too: what singles the layout out. */
  readonly signature?: readonly string[];
  /** Fields read as written (text a trader typed: a note), not trimmed. */
  readonly keepSpaces?: readonly NoInfer<K>[];
  /**
   * A row must have the header's number of cells (ours: a row cut short is refused, never read with
   * fields shifted). Brokers' files are read leniently: several end their rows, or not, with a comma.
   */
  readonly sameCellCount?: boolean;
  readonly row: (cell: (key: K) => string | undefined, ctx: ReadContext) => BrokerTrade | readonly BrokerTrade[] | 'skip' | string;
}): Layout {
  const lacking = (cells: readonly string[]): K[] => {
    const index = columnIndex(cells, spec.fields);
    return spec.required.filter((k) => index[k] === undefined);
  };
  // The header is the first of the file's first lines that names every required column (report
  // exports put a title or an account line above it).
  const headerAt = (records: readonly FileRecord[]): number => records.slice(0, HEADER_SEARCH).findIndex((r) => lacking(r.cells).length === 0);
  const label = (k: K): string => spec.fields[k][0] ?? k;
  return {
    id: spec.id,
    name: spec.name,
    how: spec.how,
    columns: (Object.keys(spec.fields) as K[]).map(label),
    needs: `the columns ${spec.required.map(label).join(', ')}${spec.signature === undefined ? '' : ` and one of ${spec.signature.join(', ')}`}`,
    detect: (records) => {
      const at = headerAt(records);
      const names = (records[at]?.cells ?? []).map(headerName);
      return at >= 0 && (spec.signature === undefined || spec.signature.some((s) => names.includes(headerName(s))));
    },
    missing: (records) => {
      const at = headerAt(records);
      if (at >= 0) {
        const names = (records[at]?.cells ?? []).map(headerName);
        const twice = Object.values<readonly string[]>(spec.fields).find((aliases) =>
          aliases.some((a) => names.indexOf(headerName(a)) !== names.lastIndexOf(headerName(a))),
        );
        return twice === undefined ? undefined : `the header names the column ${twice[0] ?? ''} twice`;
      }
      // The line with the fewest required columns missing is the one the trader meant as the header.
      const lacks = records
        .slice(0, HEADER_SEARCH)
        .filter((r) => !isBlank(r.cells))
        .map((r) => lacking(r.cells))
        .reduce<K[] | undefined>((best, l) => (best === undefined || l.length < best.length ? l : best), undefined);
      return `the header lacks ${(lacks ?? spec.required).map(label).join(', ')}`;
    },
    read: (records, ctx) => {
      const at = Math.max(0, headerAt(records));
      const head = records[at];
      const data = records.slice(at + 1);
      if (head === undefined) return [];
      const index = columnIndex(head.cells, spec.fields);
      const headNames = head.cells.map(headerName);
      return data.flatMap((r, i): BrokerRow[] => {
        const row = i + 1;
        // Blank lines, and a header repeated inside the file (Flex queries of several accounts), are no execution.
        if (isBlank(r.cells) || r.cells.map(headerName).join('\u0000') === headNames.join('\u0000')) return [{ row, kind: 'skipped' }];
        if (spec.sameCellCount === true && r.cells.length !== head.cells.length)
          return [{ row, kind: 'invalid', message: 'the row does not have as many cells as the header' }];
        const out = spec.row(cellsOf(r.cells, index, spec.keepSpaces), ctx);
        if (out === 'skip') return [{ row, kind: 'skipped' }];
        if (typeof out === 'string') return [{ row, kind: 'invalid', message: out }];
        return (Array.isArray(out) ? out : [out]).map((trade: BrokerTrade) => ({ row, kind: 'trade', trade }));
      });
    },
  };
}
