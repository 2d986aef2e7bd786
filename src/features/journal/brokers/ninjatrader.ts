// NinjaTrader 8's executions (DESIGN §17): `ES 03-24` contracts (stored as `ESH24`), Buy / Sell with
// E/X telling entry from exit, a 12-hour clock (`1/5/2024 1:15:00 PM`) in the platform's zone, and
// commissions written `$1.24`. ID is the execution's id.
import { absolute, amountOf } from './values.ts';
import { contractSymbol, sideAndQuantity, timeOf } from './common.ts';
import { tabular } from './layout.ts';

export const ninjaTrader = tabular({
  id: 'ninjatrader',
  name: 'NinjaTrader 8 — Executions',
  how: 'Control Center → New → Trade Performance → Executions → Generate → right-click → Export (CSV)',
  fields: {
    symbol: ['Instrument'],
    side: ['Action'],
    quantity: ['Quantity'],
    price: ['Price'],
    executedAt: ['Time'],
    id: ['ID'],
    entryExit: ['E/X'],
    fee: ['Commission'],
    account: ['Account'],
  },
  required: ['symbol', 'side', 'quantity', 'price', 'executedAt'],
  signature: ['E/X', 'Connection', 'Rate'],
  row: (cell, ctx) => {
    const sq = sideAndQuantity(cell('side'), cell('quantity'), ctx);
    if (typeof sq === 'string') return sq;
    const at = timeOf(cell('executedAt'), ctx, 'Time');
    if (typeof at !== 'string') return at.problem;
    const instrument = cell('symbol') ?? '';
    const symbol = contractSymbol(instrument);
    return {
      symbol,
      ...sq,
      price: amountOf(cell('price'), ctx.decimalComma)?.digits ?? cell('price') ?? '',
      fee: absolute(cell('fee'), ctx.decimalComma),
      executedAt: at,
      externalId: cell('id') || undefined,
      // NinjaTrader trades stocks and forex too (`AAPL`, `EURUSD`): a contract month (`ES 03-24`) is
      // what makes a future; the others keep the journal's default (a stock at ×1).
      assetClass: symbol !== instrument.trim().toUpperCase() ? 'future' : undefined,
    };
  },
});
