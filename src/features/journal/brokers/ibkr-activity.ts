// Interactive Brokers Activity Statement as CSV (DESIGN §17): one file of many sections, each line
// starting with its section's name and its kind (Header, Data, SubTotal, Total). Only the Trades
// section's Data rows are executions; its subtotals, totals, closed-lot lines and a header repeated
// further down (IBKR starts each asset category's columns again) are skipped rows; the lines of other
// sections are no rows at all (account information, cash, interest). Rows are numbered by their line
// in the file.
import { absolute, amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { cellsOf, columnIndex, headerName, type BrokerRow, type Layout } from './layout.ts';

const FIELDS = {
  discriminator: ['DataDiscriminator'],
  assetCategory: ['Asset Category'],
  symbol: ['Symbol'],
  executedAt: ['Date/Time'],
  quantity: ['Quantity'],
  price: ['T. Price', 'Trade Price'],
  fee: ['Comm/Fee', 'Comm in USD', 'Commission'],
  multiplier: ['Multiplier', 'Mult'],
} as const;

const ASSET_CATEGORIES: Readonly<Record<string, string>> = {
  stocks: 'stock',
  futures: 'future',
  'equity and index options': 'option',
  'options on futures': 'option',
  forex: 'forex',
  crypto: 'crypto',
  cfds: 'cfd',
};

const isTrades = (cells: readonly string[]): boolean => headerName(cells[0] ?? '') === 'trades';

export const ibkrActivity: Layout = {
  id: 'ibkr-activity',
  name: 'Interactive Brokers — Activity Statement (Trades section)',
  how: 'Client Portal → Performance & Reports → Statements → Activity → format CSV → Run',
  columns: ['Trades,Header,…', ...Object.values<readonly string[]>(FIELDS).map((a) => a[0] ?? '')],
  needs: 'a "Trades,Header,…" line naming Asset Category, Symbol, Date/Time, Quantity, T. Price, Comm/Fee',
  detect: (records) => records.some((r) => isTrades(r.cells) && headerName(r.cells[1] ?? '') === 'header'),
  missing: (records) => (ibkrActivity.detect(records) ? undefined : 'no "Trades,Header,…" line: export the statement as CSV with its Trades section'),
  read: (records, ctx) => {
    const out: BrokerRow[] = [];
    let index: ReturnType<typeof columnIndex<keyof typeof FIELDS>> | undefined;
    const trades = records.filter((r) => isTrades(r.cells));
    // With execution detail, an order's line is followed by its executions (Trade): the executions are the fills then.
    let detail = false;
    for (const r of trades) {
      const kind = headerName(r.cells[1] ?? '');
      if (kind === 'header') {
        index = columnIndex(r.cells.slice(2), FIELDS);
        continue;
      }
      const cell = index === undefined ? undefined : cellsOf(r.cells.slice(2), index);
      if (kind === 'data' && cell !== undefined && headerName(cell('discriminator') ?? '') === 'trade') detail = true;
    }
    index = undefined;
    for (const r of trades) {
      const row = r.line;
      const kind = headerName(r.cells[1] ?? '');
      if (kind === 'header') {
        if (index !== undefined) out.push({ row, kind: 'skipped' });
        index = columnIndex(r.cells.slice(2), FIELDS);
        continue;
      }
      if (kind !== 'data' || index === undefined) {
        out.push({ row, kind: 'skipped' });
        continue;
      }
      const cell = cellsOf(r.cells.slice(2), index);
      const discriminator = headerName(cell('discriminator') ?? (detail ? 'trade' : 'order'));
      if (discriminator !== (detail ? 'trade' : 'order')) {
        out.push({ row, kind: 'skipped' });
        continue;
      }
      const sq = sideAndQuantity(undefined, cell('quantity'), ctx);
      if (typeof sq === 'string') {
        out.push({ row, kind: 'invalid', message: sq });
        continue;
      }
      const at = timeOf(cell('executedAt'), ctx, 'Date/Time');
      if (typeof at !== 'string') {
        out.push({ row, kind: 'invalid', message: at.problem });
        continue;
      }
      const category = headerName(cell('assetCategory') ?? '');
      const price = amountOf(cell('price'), ctx.decimalComma);
      out.push({
        row,
        kind: 'trade',
        trade: {
          symbol: (cell('symbol') ?? '').replace(/\s+/g, '').toUpperCase(),
          ...sq,
          price: price?.digits ?? cell('price') ?? '',
          fee: absolute(cell('fee'), ctx.decimalComma),
          executedAt: at,
          assetClass: ASSET_CATEGORIES[category] ?? (category === '' ? undefined : category),
          multiplier: absolute(cell('multiplier'), ctx.decimalComma),
        },
      });
    }
    return out;
  },
};
