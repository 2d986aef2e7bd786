// TopstepX / ProjectX trades (DESIGN §17): one row is a whole round trip, so it becomes two fills — the
// entry (a buy for Long, a sell for Short) at EnteredAt / EntryPrice and the exit at ExitedAt /
// ExitPrice, ids `<Id>-entry` / `<Id>-exit`, both with the row's number. The row's Fees and
// Commissions go on the exit fill: the round trip nets the same, and the fee lands on the day the trip
// closes, where the journal counts the trip. Times carry their offset (`12/18/2025 13:26:13 +01:00`).
import { absolute, addAmounts, amountOf } from './values.ts';
import { contractSymbol, timeOf } from './common.ts';
import { tabular, type BrokerTrade } from './layout.ts';

export const topstepX = tabular({
  id: 'topstepx',
  name: 'TopstepX / ProjectX — Trades',
  how: 'TopstepX → Trades → Export (CSV)',
  fields: {
    id: ['Id'],
    symbol: ['ContractName'],
    enteredAt: ['EnteredAt'],
    exitedAt: ['ExitedAt'],
    entryPrice: ['EntryPrice'],
    exitPrice: ['ExitPrice'],
    fees: ['Fees'],
    commissions: ['Commissions'],
    size: ['Size'],
    type: ['Type'],
  },
  required: ['symbol', 'enteredAt', 'exitedAt', 'entryPrice', 'exitPrice', 'size', 'type'],
  row: (cell, ctx) => {
    const type = (cell('type') ?? '').toLowerCase();
    if (type !== 'long' && type !== 'short') return `Type: ${JSON.stringify((cell('type') ?? '').slice(0, 20))} is neither Long nor Short`;
    const size = amountOf(cell('size'), ctx.decimalComma);
    if (size === undefined) return `Size: ${JSON.stringify((cell('size') ?? '').slice(0, 20))} is not a number`;
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
