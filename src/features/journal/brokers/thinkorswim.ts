// thinkorswim (Schwab) Account Statement as CSV (DESIGN §17): sections with a title line; the fills
// are in "Account Trade History" (`,Exec Time,Spread,Side,Qty,Pos Effect,Symbol,Exp,Strike,Type,Price,…`),
// which ends at a blank line. Exec Time is `1/5/24 10:30:00` (US order) in no zone; Qty is signed;
// the legs of a spread after its first leave Exec Time empty. Options become OCC-style symbols
// (`AAPL240119C190`), futures keep their `/`. Fees sit in another section: fills come without them.
import { amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { cellsOf, columnIndex, headerName, isBlank, type BrokerRow, type Layout } from './layout.ts';

const FIELDS = {
  executedAt: ['Exec Time'],
  side: ['Side'],
  quantity: ['Qty'],
  posEffect: ['Pos Effect'],
  symbol: ['Symbol'],
  expiry: ['Exp'],
  strike: ['Strike'],
  type: ['Type'],
  price: ['Price'],
  netPrice: ['Net Price'],
} as const;

const TITLE = 'account trade history';
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];

/** `19 JAN 24` (or `1/19/24`) → `240119`. */
function expiryCode(text: string): string | undefined {
  const m = /^(\d{1,2})\s+([A-Za-z]{3})\s+(\d{2})$/.exec(text.trim());
  if (m) {
    const month = MONTHS.indexOf((m[2] ?? '').toUpperCase());
    return month < 0 ? undefined : `${m[3] ?? ''}${String(month + 1).padStart(2, '0')}${(m[1] ?? '').padStart(2, '0')}`;
  }
  const s = /^(\d{1,2})\/(\d{1,2})\/(\d{2})$/.exec(text.trim());
  return s ? `${s[3] ?? ''}${(s[1] ?? '').padStart(2, '0')}${(s[2] ?? '').padStart(2, '0')}` : undefined;
}

export const thinkorswim: Layout = {
  id: 'thinkorswim',
  name: 'thinkorswim (Schwab) — Account Statement',
  how: 'thinkorswim → Monitor → Account Statement → the menu at the top right → Export to File (CSV)',
  columns: ['Account Trade History', ...Object.values<readonly string[]>(FIELDS).map((a) => a[0] ?? '')],
  needs: 'an "Account Trade History" section with Exec Time, Side, Qty, Symbol, Price',
  detect: (records) => records.some((r) => headerName(r.cells[0] ?? '') === TITLE),
  missing: (records) => (thinkorswim.detect(records) ? undefined : 'no "Account Trade History" section: export the Account Statement to a file'),
  read: (records, ctx) => {
    const out: BrokerRow[] = [];
    const start = records.findIndex((r) => headerName(r.cells[0] ?? '') === TITLE);
    const head = records[start + 1];
    if (head === undefined) return out;
    const index = columnIndex(head.cells, FIELDS);
    let lastTime: string | undefined;
    for (const r of records.slice(start + 2)) {
      // The section ends at the first line of blanks (the next section's title follows).
      if (isBlank(r.cells) || r.cells.filter((c) => c.trim() !== '').length === 1) break;
      const cell = cellsOf(r.cells, index);
      const row = r.line;
      const time = cell('executedAt') || lastTime;
      lastTime = time;
      const sq = sideAndQuantity(cell('side'), cell('quantity'), ctx);
      if (typeof sq === 'string') {
        out.push({ row, kind: 'invalid', message: sq });
        continue;
      }
      const at = timeOf(time, ctx, 'Exec Time');
      if (typeof at !== 'string') {
        out.push({ row, kind: 'invalid', message: at.problem });
        continue;
      }
      const type = (cell('type') ?? '').toUpperCase();
      const underlying = (cell('symbol') ?? '').toUpperCase();
      let symbol = underlying;
      let assetClass = underlying.startsWith('/') ? 'future' : 'stock';
      if (type === 'CALL' || type === 'PUT') {
        const expiry = expiryCode(cell('expiry') ?? '');
        const strike = amountOf(cell('strike'))?.digits;
        if (expiry === undefined || strike === undefined) {
          out.push({ row, kind: 'invalid', message: 'an option row needs Exp (19 JAN 24) and Strike' });
          continue;
        }
        symbol = `${underlying}${expiry}${type[0] ?? ''}${strike}`;
        assetClass = 'option';
      }
      const price = amountOf(cell('price')) ?? amountOf(cell('netPrice'));
      out.push({
        row,
        kind: 'trade',
        trade: { symbol, ...sq, price: price?.digits ?? cell('price') ?? '', executedAt: at, assetClass },
      });
    }
    return out;
  },
};
