// The futures platforms (DESIGN §17): Tradovate, NinjaTrader 8 and TopstepX / ProjectX. Every fill is a
// future; its multiplier comes from the exchange table by the contract's root (`MESZ5` → MES ×5).
import { absolute, addAmounts, amountOf } from './values.ts';
import { contractSymbol, sideAndQuantity, timeOf } from './common.ts';
import { tabular, type BrokerTrade } from './layout.ts';

/** Tradovate's Orders (or Fills) CSV: rows that are not `Filled` are orders that never traded. */
export const tradovate = tabular({
  id: 'tradovate',
  name: 'Tradovate — Orders or Fills CSV',
  how: 'Tradovate → Account → Orders (or Fills) → Download CSV',
  fields: {
    symbol: ['contract'],
    side: ['b/s'],
    quantity: ['filledqty', 'filled qty', 'quantity'],
    price: ['avgprice', 'avg fill price', 'price'],
    executedAt: ['fill time', 'timestamp', 'date'],
    status: ['status'],
    id: ['fill id', 'orderid', 'order id'],
    fee: ['commission', 'fees'],
  },
  required: ['symbol', 'side', 'quantity', 'price', 'executedAt'],
  row: (cell, ctx) => {
    const status = cell('status');
    if (status !== undefined && status.toLowerCase() !== 'filled') return 'skip';
    if (amountOf(cell('quantity'))?.digits === '0') return 'skip';
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

/** NinjaTrader 8's executions: `ES 03-24` contracts, a 12-hour clock, commissions as `$1.24`. */
export const ninjaTrader = tabular({
  id: 'ninjatrader',
  name: 'NinjaTrader 8 — Executions',
  how: 'Control Center → New → Trade Performance → Executions → Generate → right-click → Export (CSV)',
  fields: {
    symbol: ['instrument'],
    side: ['action'],
    quantity: ['quantity'],
    price: ['price'],
    executedAt: ['time'],
    id: ['id'],
    entryExit: ['e/x'],
    fee: ['commission'],
    account: ['account'],
  },
  required: ['symbol', 'side', 'quantity', 'price', 'executedAt'],
  signature: ['e/x', 'connection', 'rate'],
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
      // NinjaTrader trades stocks and forex too: a contract month (`ES 03-24`) is what makes a future.
      assetClass: symbol !== instrument.trim().toUpperCase() ? 'future' : undefined,
    };
  },
});

/**
 * TopstepX / ProjectX trades: one row is a whole round trip, so it becomes two fills — the entry
 * (a buy for Long) and the exit — with ids `<Id>-entry` / `<Id>-exit`. The row's fees and
 * commissions go on the exit fill: the round trip nets the same, and an open position has none.
 */
export const topstepX = tabular({
  id: 'topstepx',
  name: 'TopstepX / ProjectX — Trades',
  how: 'TopstepX → Trades → Export (CSV)',
  fields: {
    id: ['id'],
    symbol: ['contractname'],
    enteredAt: ['enteredat'],
    exitedAt: ['exitedat'],
    entryPrice: ['entryprice'],
    exitPrice: ['exitprice'],
    fees: ['fees'],
    commissions: ['commissions'],
    size: ['size'],
    type: ['type'],
  },
  required: ['symbol', 'enteredAt', 'exitedAt', 'entryPrice', 'exitPrice', 'size', 'type'],
  row: (cell, ctx) => {
    const type = (cell('type') ?? '').toLowerCase();
    if (type !== 'long' && type !== 'short') return `Type: ${JSON.stringify((cell('type') ?? '').slice(0, 20))} is neither Long nor Short`;
    const size = amountOf(cell('size'), ctx.decimalComma);
    if (size === undefined) return 'Size: not a number';
    const entered = timeOf(cell('enteredAt'), ctx, 'EnteredAt');
    if (typeof entered !== 'string') return entered.problem;
    const exited = timeOf(cell('exitedAt'), ctx, 'ExitedAt');
    if (typeof exited !== 'string') return exited.problem;
    const fee = addAmounts([absolute(cell('fees'), ctx.decimalComma), absolute(cell('commissions'), ctx.decimalComma)]);
    const id = cell('id');
    const symbol = contractSymbol(cell('symbol') ?? '');
    const leg = (side: string, price: string | undefined, executedAt: string, suffix: string, legFee: string | undefined): BrokerTrade => ({
      symbol,
      side,
      quantity: size.digits,
      price: amountOf(price, ctx.decimalComma)?.digits ?? price ?? '',
      fee: legFee,
      executedAt,
      externalId: id ? `${id}-${suffix}` : undefined,
      assetClass: 'future',
    });
    return [
      leg(type === 'long' ? 'buy' : 'sell', cell('entryPrice'), entered, 'entry', undefined),
      leg(type === 'long' ? 'sell' : 'buy', cell('exitPrice'), exited, 'exit', fee),
    ];
  },
});
