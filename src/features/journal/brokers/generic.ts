// The service's own layout (DESIGN §14, §17): the columns of its export, in any order and case.
import { absolute, amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { tabular, type BrokerTrade } from './layout.ts';

/**
 * The export writes a `'` before a text cell starting with =, +, -, @, tab or CR (or quotes and then
 * one of those), so a spreadsheet never runs it; read back, exactly that one `'` goes.
 */
const unprotect = (cell: string | undefined): string | undefined => (cell !== undefined && /^'+[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell);

/**
 * Tags in one cell: a JSON array (what the export writes when a tag holds `;`), taken exactly, else
 * `;`-separated and trimmed (a hand-written `a; b`). The export protects the cell as a whole, so only
 * the cell's own leading `'` goes, never one inside a tag.
 */
function tagsOf(cell: string | undefined): string[] {
  const text = unprotect(cell) ?? '';
  if (text.trim() === '') return [];
  if (text.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (Array.isArray(parsed) && parsed.every((t) => typeof t === 'string')) return parsed;
    } catch {
      // Not JSON: a tag that starts with `[`, read as `;`-separated below.
    }
  }
  return text
    .split(';')
    .map((t) => t.trim())
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
    executedAt: ['executedAt'],
    externalId: ['externalId'],
    note: ['note'],
    tags: ['tags'],
    assetClass: ['assetClass'],
    multiplier: ['multiplier'],
    stopPrice: ['stopPrice'],
  },
  required: ['symbol', 'side', 'quantity', 'price', 'executedAt'],
  keepSpaces: ['externalId', 'note'],
  sameCellCount: true,
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
    // An empty cell is a field not given (the journal's defaults apply), as in the create route.
    const given = (text: string | undefined): string | undefined => (text === '' ? undefined : text);
    const fee = given(cell('fee'));
    const trade: BrokerTrade = {
      symbol: (unprotect(cell('symbol')) ?? '').toUpperCase(),
      ...sq,
      price: plain('price') ?? '',
      // Brokers write a commission negative: a fee is its size.
      fee: fee === undefined ? undefined : (absolute(fee, ctx.decimalComma) ?? fee),
      executedAt: at,
      externalId: given(unprotect(cell('externalId'))),
      note: given(unprotect(cell('note'))),
      tags: tags.length === 0 ? undefined : tags,
      assetClass: given(cell('assetClass')),
      multiplier: plain('multiplier'),
      stopPrice: plain('stopPrice'),
    };
    return trade;
  },
});
