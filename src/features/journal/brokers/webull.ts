// Webull's order history (DESIGN §17): every order, filled or not; times carry a zone abbreviation
// (`01/05/2024 10:30:00 EST`) and prices may be written `@187.50`. Several dialects name the filled
// quantity and price differently.
import { amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { tabular } from './layout.ts';

/** An OCC option symbol: `AAPL240119C00190000`. */
const OCC = /^[A-Z.]{1,6}\d{6}[CP]\d{8}$/;

export const webull = tabular({
  id: 'webull',
  name: 'Webull — Orders (order history)',
  how: 'Webull desktop → Orders → Order history → Export (CSV)',
  fields: {
    symbol: ['Symbol'],
    side: ['Side'],
    status: ['Status'],
    quantity: ['Filled', 'Filled Qty', 'Total Qty'],
    price: ['Avg Price', 'Filled Avg Price', 'Price'],
    executedAt: ['Filled Time', 'Placed Time'],
    name: ['Name'],
  },
  required: ['symbol', 'side', 'status', 'quantity', 'price', 'executedAt'],
  signature: ['Filled Time', 'Time-in-Force', 'Placed Time'],
  row: (cell, ctx) => {
    const status = (cell('status') ?? '').toLowerCase();
    const filled = amountOf(cell('quantity'), ctx.decimalComma)?.digits;
    if ((status !== 'filled' && status !== 'partially filled') || filled === undefined || filled === '0') return 'skip';
    const sq = sideAndQuantity(cell('side'), cell('quantity'), ctx);
    if (typeof sq === 'string') return sq;
    const at = timeOf(cell('executedAt'), ctx, 'Filled Time');
    if (typeof at !== 'string') return at.problem;
    const symbol = (cell('symbol') ?? '').toUpperCase();
    return {
      symbol,
      ...sq,
      price: amountOf(cell('price'), ctx.decimalComma)?.digits ?? cell('price') ?? '',
      executedAt: at,
      assetClass: OCC.test(symbol) ? 'option' : undefined,
    };
  },
});
