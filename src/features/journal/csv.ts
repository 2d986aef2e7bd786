// The CSV form of trades (DESIGN §14): reading an import with csv-parse (RFC 4180), writing an export
// in the same columns. A file that is not CSV, or has no usable header, is refused whole; a bad row
// is refused alone, by its 1-based data-row number.
import { createHash } from 'node:crypto';
import { CsvError, parse } from 'csv-parse/sync';
import { AppError } from '../../http/errors.ts';
import type { RawTrade } from './fields.ts';

export const MAX_CSV_BYTES = 5 * 1024 * 1024;
export const MAX_CSV_ROWS = 50_000;

/** The import's columns, in the export's order; the header names them in any order and case. */
export const COLUMNS = ['symbol', 'side', 'quantity', 'price', 'fee', 'executedAt', 'externalId', 'note'] as const;
type Column = (typeof COLUMNS)[number];
const REQUIRED: readonly Column[] = ['symbol', 'side', 'quantity', 'price', 'executedAt'];
const BY_LOWER = new Map<string, Column>(COLUMNS.map((c) => [c.toLowerCase(), c]));

export interface CsvRow {
  /** 1-based data row (the header is not counted). */
  readonly row: number;
  /** The row's cells by column, or undefined when it does not have the header's number of cells. */
  readonly trade: RawTrade | undefined;
}

function notCsv(message: string): AppError {
  return new AppError('VALIDATION_ERROR', message, { details: [{ path: '/', message }] });
}

/** The data rows of an import file. */
export function readTradeCsv(text: string): CsvRow[] {
  let records: string[][];
  try {
    records = parse(text, { bom: true, skip_empty_lines: true, relax_column_count: true }) as string[][];
  } catch (err) {
    if (err instanceof CsvError) throw notCsv(`the body is not CSV (RFC 4180): ${err.message.slice(0, 200)}`);
    throw err;
  }
  const [header, ...data] = records;
  if (header === undefined) throw notCsv('the CSV has no header row');
  const index = new Map<Column, number>();
  header.forEach((name, i) => {
    const column = BY_LOWER.get(name.trim().toLowerCase());
    if (column === undefined) return;
    if (index.has(column)) throw notCsv(`the header names the column ${column} twice`);
    index.set(column, i);
  });
  const missing = REQUIRED.filter((c) => !index.has(c));
  if (missing.length > 0)
    throw notCsv(`the header row lacks the column(s) ${missing.join(', ')} (it needs ${REQUIRED.join(', ')}; fee, externalId and note are optional)`);
  if (data.length > MAX_CSV_ROWS) throw notCsv(`the CSV has ${data.length} data rows; at most ${MAX_CSV_ROWS} are imported at once`);
  const cell = (record: string[], c: Column): string | undefined => {
    const i = index.get(c);
    return i === undefined ? undefined : record[i];
  };
  return data.map((record, i) => ({
    row: i + 1,
    trade:
      record.length !== header.length
        ? undefined
        : {
            symbol: (cell(record, 'symbol') ?? '').trim(),
            side: cell(record, 'side') ?? '',
            quantity: (cell(record, 'quantity') ?? '').trim(),
            price: (cell(record, 'price') ?? '').trim(),
            fee: cell(record, 'fee')?.trim(),
            executedAt: (cell(record, 'executedAt') ?? '').trim(),
            externalId: cell(record, 'externalId'),
            note: cell(record, 'note'),
          },
  }));
}

/**
 * The key of an imported row without externalId: a digest of its own fields and of how many equal rows
 * came before it in the file, so two equal fills in one file are both imported, and the same file
 * imported again adds nothing.
 */
export function importKey(fields: readonly (string | null)[], occurrence: number): string {
  return createHash('sha256')
    .update(JSON.stringify([...fields, occurrence]))
    .digest('base64url');
}

/**
 * One CSV cell (RFC 4180: quoted when it holds a comma, a quote or a line break). A cell a spreadsheet
 * would run as a formula — starting with =, +, - or @, or with a tab or carriage return (OWASP's list) —
 * is written with a leading '. No exported number can start so (quantities, prices and fees are ≥ 0).
 */
export function csvCell(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

export const csvLine = (cells: readonly string[]): string => `${cells.map(csvCell).join(',')}\r\n`;
