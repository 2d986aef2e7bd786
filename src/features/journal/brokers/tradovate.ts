// Tradovate's Orders or Fills CSV (DESIGN §17). The Orders file lists every order, filled or not:
// a row whose Status is not Filled (Canceled, Working, Rejected, Expired) never traded and is skipped.
// The Fills file has no Status: every row is a fill, with its Fill ID and commission. Values carry a
// leading space (` Buy`, ` Filled`); times are `01/05/2024 10:30:01`, the platform's wall clock.
// Every row is a future; its multiplier comes from the exchange table by the contract's root (`MESH4`).
import { absolute, amountOf } from './values.ts';
import { contractSymbol, sideAndQuantity, timeOf } from './common.ts';
import { tabular } from './layout.ts';

export const tradovate = tabular({
  id: 'tradovate',
  name: 'Tradovate — Orders or Fills CSV',
  how: 'Tradovate → Account → Orders (or Reports → Fills) → Download CSV',
  fields: {
    symbol: ['Contract'],
    side: ['B/S'],
    quantity: ['filledQty', 'Filled Qty', 'Quantity'],
    price: ['avgPrice', 'Avg Fill Price', 'Price'],
    executedAt: ['Fill Time', 'Timestamp', 'Date'],
    status: ['Status'],
    id: ['Fill ID', 'orderId', 'Order ID'],
    fee: ['commission', 'Fees'],
  },
  required: ['symbol', 'side', 'quantity', 'price', 'executedAt'],
  row: (cell, ctx) => {
    const status = cell('status');
    if (status !== undefined && status.toLowerCase() !== 'filled') return 'skip';
    if (amountOf(cell('quantity'), ctx.decimalComma)?.digits === '0') return 'skip';
    const sq = sideAndQuantity(cell('side'), cell('quantity'), ctx);
    if (typeof sq === 'string') return sq;
    const at = timeOf(cell('executedAt'), ctx, 'Fill Time');
    if (typeof at !== 'string') return at.problem;
    return {
      symbol: contractSymbol(cell('symbol') ?? ''),
      ...sq,
      price: amountOf(cell('price'), ctx.decimalComma)?.digits ?? cell('price') ?? '',
      fee: absolute(cell('fee'), ctx.decimalComma),
      executedAt: at,
      externalId: cell('id') || undefined,
      assetClass: 'future',
    };
  },
});
