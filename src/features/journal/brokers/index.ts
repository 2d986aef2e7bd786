// Broker trade files (DESIGN §17): the bytes decoded, the delimiter and number style found, the layout
// detected from the header (or named with ?format=), every row read as a trade, a skip or a problem.
import { CsvError, parse } from 'csv-parse/sync';
import { AppError } from '../../../http/errors.ts';
import { MAX_CSV_ROWS } from '../csv.ts';
import { generic } from './generic.ts';
import { ibkrActivity } from './ibkr-activity.ts';
import { ibkrFlex } from './ibkr-flex.ts';
import { metaTrader5 } from './metatrader5.ts';
import { ninjaTrader } from './ninjatrader.ts';
import { thinkorswim } from './thinkorswim.ts';
import { topstepX } from './topstepx.ts';
import { tradovate } from './tradovate.ts';
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

/**
 * The delimiter, from the header: the first line that holds any of `,` `;` tab outside quotes (report
 * exports put a title line above it), and of those the one it holds most. Data rows are not asked: a
 * `;` file's decimal commas would outvote its delimiter.
 */
function delimiterOf(text: string): string {
  for (const line of text.split(/\r\n|\n|\r/, 50)) {
    const bare = line.replace(/"[^"]*"/g, '');
    const counts = [',', ';', '\t'].map((d) => [d, bare.split(d).length - 1] as const).sort((a, b) => b[1] - a[1]);
    const [best] = counts;
    if (best !== undefined && best[1] > 0) return best[0];
  }
  return ',';
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
      // Lines of blanks are kept: they are skipped rows, and rows keep the numbers a spreadsheet shows.
      skip_empty_lines: false,
      // A file pasted together from two systems may mix line ends.
      record_delimiter: ['\r\n', '\n', '\r'],
      relax_column_count: true,
      // thinkorswim writes cells like ="12345": a quote inside an unquoted cell is text.
      relax_quotes: true,
      raw: true,
    }) as unknown as { record: string[]; raw: string }[];
    // A record starts on the line after the breaks of those before it (a quoted cell may hold some).
    // Counted from the raw text, a CRLF once: csv-parse's own info.lines counts a quoted CRLF twice.
    let line = 1;
    records = parsed.map((p) => {
      const at = line;
      line += p.raw.match(/\r\n|\r|\n/g)?.length ?? 0;
      return { cells: p.record, line: at };
    });
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
      `no known layout recognises the header; each needs: ${LAYOUTS.map((l) => `${l.id} (${l.name}): ${l.needs}`).join('; ')}. ` +
        'Name one with ?format= to be told what the file lacks.',
    );
  const problem = layout.missing(records);
  if (problem !== undefined) throw refused(`not a ${layout.name} file: ${problem}`);
  // Every line after the header counts (for a statement: every line of it): a file is refused before
  // any of its rows is read.
  const data = records.length - 1;
  if (data > MAX_CSV_ROWS) throw refused(`the CSV has ${data} data rows; at most ${MAX_CSV_ROWS} are imported at once`);
  const ctx: ReadContext = { decimalComma: delimiter === ';', dateOrder: dateOrderOf(records, delimiter) };
  return { format: layout.id, rows: layout.read(records, ctx) };
}
