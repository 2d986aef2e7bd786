// Broker trade files (DESIGN §17): the bytes decoded, the delimiter and number style found, the layout
// detected from the header (or named with ?format=), every row read as a trade, a skip or a problem.
import { CsvError, parse } from 'csv-parse/sync';
import { AppError } from '../../../http/errors.ts';
import { MAX_CSV_ROWS } from '../csv.ts';
import { generic } from './generic.ts';
import { ibkrActivity } from './ibkr-activity.ts';
import { ibkrFlex } from './ibkr-flex.ts';
import { ninjaTrader, topstepX, tradovate } from './futures-platforms.ts';
import { metaTrader5 } from './metatrader5.ts';
import { thinkorswim } from './thinkorswim.ts';
import { webull } from './webull.ts';
import { isBlank, type BrokerRow, type FileRecord, type Layout, type ReadContext } from './layout.ts';
import { leadingSlashNumbers, type DateOrder } from './values.ts';

export { decodeTradeFile } from './decode.ts';
export type { BrokerRow, BrokerTrade } from './layout.ts';

/** In the order detection tries them: the multi-section statements, the brokers, ours last. */
const LAYOUTS: readonly Layout[] = [ibkrActivity, thinkorswim, ibkrFlex, tradovate, ninjaTrader, webull, metaTrader5, topstepX, generic];

export interface ImportFormat {
  readonly id: string;
  readonly name: string;
  readonly how: string;
  readonly columns: readonly string[];
}

export const IMPORT_FORMATS: readonly ImportFormat[] = [generic, ...LAYOUTS.filter((l) => l !== generic)].map((l) => ({
  id: l.id,
  name: l.name,
  how: l.how,
  columns: l.columns,
}));

export interface BrokerFile {
  readonly format: string;
  readonly rows: readonly BrokerRow[];
}

function refused(message: string, path = '/'): AppError {
  return new AppError('VALIDATION_ERROR', message, { details: [{ path, message }] });
}

/** The delimiter of the file's first lines: the one of `,` `;` tab that splits them most. */
function delimiterOf(text: string): string {
  const head = text
    .split(/\r?\n/, 10)
    .join('\n')
    .replace(/"[^"]*"/g, '');
  const count = (d: string): number => head.split(d).length - 1;
  const [best = ','] = [',', ';', '\t'].sort((a, b) => count(b) - count(a));
  return count(best) === 0 ? ',' : best;
}

/**
 * Slash dates are month first (US brokers, what every layout here writes) unless a row of the file has
 * a first number above 12, or the file is `;`-delimited (European) and no second number is above 12:
 * then day first, for the whole file.
 */
function dateOrderOf(records: readonly FileRecord[], delimiter: string): DateOrder {
  let firstOver = false;
  let secondOver = false;
  for (const r of records)
    for (const c of r.cells) {
      const n = leadingSlashNumbers(c);
      if (n === undefined) continue;
      if (n[0] > 12) firstOver = true;
      if (n[1] > 12) secondOver = true;
    }
  return firstOver || (delimiter === ';' && !secondOver) ? 'day-first' : 'month-first';
}

/** Detects the layout (or uses `format`), reads every data row. */
export function readBrokerFile(text: string, format?: string): BrokerFile {
  const chosen = format === undefined ? undefined : LAYOUTS.find((l) => l.id === format.trim().toLowerCase());
  if (format !== undefined && chosen === undefined)
    throw refused(`format ${format.slice(0, 40)} is not one of ${LAYOUTS.map((l) => l.id).join(', ')}`, '/format');
  const delimiter = delimiterOf(text);
  let records: FileRecord[];
  try {
    const parsed = parse(text.replace(/^\uFEFF/, ''), {
      delimiter,
      skip_empty_lines: true,
      relax_column_count: true,
      // thinkorswim writes cells like ="12345": a quote inside an unquoted cell is text.
      relax_quotes: true,
      info: true,
    }) as unknown as {
      record: string[];
      info: { lines: number };
    }[];
    records = parsed.map((p) => ({ cells: p.record, line: p.info.lines }));
  } catch (err) {
    if (err instanceof CsvError) throw refused(`the body is not CSV (RFC 4180): ${err.message.slice(0, 200)}`);
    throw err;
  }
  const first = records.findIndex((r) => !isBlank(r.cells));
  if (first < 0) throw refused('the CSV has no header row');
  records = records.slice(first);
  const layout = chosen ?? LAYOUTS.find((l) => l.detect(records));
  if (layout === undefined)
    throw refused(
      'no known layout recognises the header: ' +
        'the generic one needs the columns symbol, side, quantity, price, executedAt ' +
        '(fee, externalId, note, tags, assetClass, multiplier, stopPrice optional); ' +
        `broker files read: ${IMPORT_FORMATS.filter((f) => f.id !== 'generic')
          .map((f) => f.name)
          .join('; ')} (GET /api/journal/import-formats lists their columns)`,
    );
  const problem = layout.missing(records);
  if (problem !== undefined) throw refused(`not a ${layout.name} file: ${problem}`);
  // The header (and, for statements, every other section) is not a data row.
  if (records.length - 1 > MAX_CSV_ROWS) throw refused(`the CSV has ${records.length - 1} data rows; at most ${MAX_CSV_ROWS} are imported at once`);
  const ctx: ReadContext = { decimalComma: delimiter === ';', dateOrder: dateOrderOf(records, delimiter) };
  return { format: layout.id, rows: layout.read(records, ctx) };
}
