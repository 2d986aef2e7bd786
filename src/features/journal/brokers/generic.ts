// The service's own layout (DESIGN §14, §17): the columns of its export, in any order and case.
import { absolute, amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { tabular, type BrokerTrade } from './layout.ts';

/**
 * The export writes a `'` before a text cell starting with =, +, -, @, tab or CR (or quotes and then
 * one of those), so a spreadsheet never runs it; read back, exactly that one `'` goes.
 */
const unprotect = (cell: string | undefined): string | undefined => (cell !== undefined && /^'+[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell);

/** Tags in one cell: a JSON array (what the export writes when a tag holds `;`), else `;`-separated. */
function tagsOf(cell: string | undefined): string[] | string {
  const text = unprotect(cell)?.trim() ?? '';
  if (text === '') return [];
  if (text.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (Array.isArray(parsed) && parsed.every((t) => typeof t === 'string')) return parsed.map((t: string) => unprotect(t) ?? t);
    } catch {
      // Not JSON: read as `;`-separated below.
    }
  }
  return text
    .split(';')
    .map((t) => unprotect(t.trim()) ?? '')
    .filter((t) => t !== '');
}

export const generic = tabular({
  id: 'generic',
  name: 'Generic CSV (this journal’s export)',
  how: 'Any spreadsheet with a header row; the journal’s own export (Journal → Export CSV) reads back unchanged',
  fields: {
    symbol: ['symbol'],
    side: ['side'],
    quantity: ['quantity'],
    price: ['price'],
    fee: ['fee'],
    executedAt: ['executedat'],
    externalId: ['externalid'],
    note: ['note'],
    tags: ['tags'],
    assetClass: ['assetclass'],
    multiplier: ['multiplier'],
    stopPrice: ['stopprice'],
  },
  required: ['symbol', 'quantity', 'price', 'executedAt'],
  keepSpaces: ['externalId', 'note'],
  row: (cell, ctx) => {
    const sq = sideAndQuantity(cell('side'), cell('quantity'), ctx);
    if (typeof sq === 'string') return sq;
    const at = timeOf(cell('executedAt'), ctx, 'executedAt');
    if (typeof at !== 'string') return at.problem;
    const tags = tagsOf(cell('tags'));
    // A value that is not a non-negative number is passed on as written: the journal's check names it.
    const plain = (key: 'price' | 'multiplier' | 'stopPrice'): string | undefined => {
      const text = cell(key);
      if (text === undefined || text === '') return undefined;
      const a = amountOf(text, ctx.decimalComma);
      return a === undefined || a.negative ? text : a.digits;
    };
    const trade: BrokerTrade = {
      symbol: unprotect(cell('symbol')) ?? '',
      ...sq,
      price: plain('price') ?? '',
      // Brokers write a commission negative: a fee is its size.
      fee: cell('fee') === undefined || cell('fee') === '' ? undefined : (absolute(cell('fee'), ctx.decimalComma) ?? cell('fee')),
      executedAt: at,
      externalId: unprotect(cell('externalId')),
      note: unprotect(cell('note')),
      tags: typeof tags === 'string' ? [] : tags,
      assetClass: cell('assetClass'),
      multiplier: plain('multiplier'),
      stopPrice: plain('stopPrice'),
    };
    return trade;
  },
});
