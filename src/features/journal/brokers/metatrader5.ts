// MetaTrader 5's deals (DESIGN §17): the Deals part of the history report. `Type` buy / sell are
// executions; balance, credit, deposit and other rows are money moves, skipped. Time is the broker
// server's (`2024.01.05 10:30:00`), read in the account's zone unless ?timezone= names the server's.
// Volume is in lots: a currency pair (`EURUSD`) is forex at 100,000 units a lot, gold (`XAUUSD`) and
// silver (`XAGUSD`) CFDs at the standard 100 and 5,000 ounces; anything else (an index, a share CFD)
// is a CFD whose contract size the deals do not state (×1: give it in a generic file, or a Contract Size
// column, when it matters). Fee = |Commission| + |Fee|; Swap is financing, not a fee, and is left out.
import { absolute, addAmounts, amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { tabular } from './layout.ts';

const CURRENCIES = new Set([
  'USD',
  'EUR',
  'GBP',
  'JPY',
  'CHF',
  'AUD',
  'NZD',
  'CAD',
  'SEK',
  'NOK',
  'DKK',
  'HKD',
  'SGD',
  'MXN',
  'ZAR',
  'TRY',
  'PLN',
  'CNH',
  'HUF',
  'CZK',
]);
const FOREX_LOT = '100000';
const METAL_LOTS: Readonly<Record<string, string>> = { XAU: '100', XAG: '5000' };

function isCurrencyPair(symbol: string): boolean {
  const s = symbol.toUpperCase().replace(/[^A-Z]/g, '');
  return s.length === 6 && CURRENCIES.has(s.slice(0, 3)) && CURRENCIES.has(s.slice(3));
}

export const metaTrader5 = tabular({
  id: 'metatrader5',
  name: 'MetaTrader 5 — Deals (history)',
  how: 'MetaTrader 5 → Toolbox → History → right-click → Deals → Report (save the deals as CSV)',
  fields: {
    executedAt: ['Time'],
    deal: ['Deal'],
    symbol: ['Symbol'],
    type: ['Type'],
    direction: ['Direction'],
    volume: ['Volume'],
    price: ['Price'],
    commission: ['Commission'],
    fee: ['Fee'],
    comment: ['Comment'],
    contractSize: ['Contract Size', 'ContractSize'],
  },
  required: ['executedAt', 'deal', 'symbol', 'type', 'volume', 'price'],
  signature: ['Direction', 'Swap', 'Profit'],
  row: (cell, ctx) => {
    const type = (cell('type') ?? '').toLowerCase();
    if (type !== 'buy' && type !== 'sell') return 'skip';
    const sq = sideAndQuantity(type, cell('volume'), ctx);
    if (typeof sq === 'string') return sq;
    const at = timeOf(cell('executedAt'), ctx, 'Time');
    if (typeof at !== 'string') return at.problem;
    const symbol = (cell('symbol') ?? '').toUpperCase();
    const forex = isCurrencyPair(symbol);
    const metal = CURRENCIES.has(symbol.slice(3, 6)) ? METAL_LOTS[symbol.slice(0, 3)] : undefined;
    // A file that states the contract size (a report saved with it, or edited) is believed over the table.
    const stated = absolute(cell('contractSize'), ctx.decimalComma);
    return {
      symbol,
      ...sq,
      price: amountOf(cell('price'), ctx.decimalComma)?.digits ?? cell('price') ?? '',
      fee: addAmounts([absolute(cell('commission'), ctx.decimalComma), absolute(cell('fee'), ctx.decimalComma)]),
      executedAt: at,
      externalId: cell('deal') || undefined,
      assetClass: forex ? 'forex' : 'cfd',
      multiplier: stated !== undefined && stated !== '0' ? stated : forex ? FOREX_LOT : (metal ?? '1'),
    };
  },
});
