// Interactive Brokers Flex Query, trades or executions as CSV (DESIGN §17): the trader picks the fields;
// the names are IBKR's. Date/Time is `20240105;103000` in no zone; Quantity is signed; Commission negative.
import { absolute, amountOf } from './values.ts';
import { sideAndQuantity, timeOf } from './common.ts';
import { tabular } from './layout.ts';

const ASSET_CLASSES: Readonly<Record<string, string>> = {
  STK: 'stock',
  FUT: 'future',
  OPT: 'option',
  FOP: 'option',
  CASH: 'forex',
  CRYPTO: 'crypto',
  CFD: 'cfd',
};

export const ibkrFlex = tabular({
  id: 'ibkr-flex',
  name: 'Interactive Brokers — Flex Query (trades / executions)',
  how: 'Client Portal → Performance & Reports → Flex Queries → a Trades query with format CSV → Run',
  fields: {
    symbol: ['Symbol'],
    side: ['Buy/Sell'],
    quantity: ['Quantity'],
    price: ['TradePrice', 'Price'],
    fee: ['IBCommission', 'Commission'],
    executedAt: ['Date/Time', 'DateTime', 'TradeDate'],
    time: ['TradeTime'],
    tradeId: ['TradeID', 'IBExecID', 'TransactionID'],
    assetClass: ['AssetClass'],
    multiplier: ['Multiplier'],
    level: ['LevelOfDetail'],
  },
  required: ['symbol', 'quantity', 'price', 'executedAt'],
  signature: ['Buy/Sell', 'AssetClass', 'TradeID', 'IBExecID', 'ClientAccountID'],
  row: (cell, ctx) => {
    // A query "including executions" lists orders and closed lots too: only executions are fills.
    const level = cell('level')?.toUpperCase();
    if (level !== undefined && level !== '' && level !== 'EXECUTION') return 'skip';
    // A cancelled trade is written as BUY (Ca.) / SELL (Ca.) beside the original.
    const word = cell('side');
    if (word !== undefined && /\(ca\.?\)/i.test(word)) return 'skip';
    const sq = sideAndQuantity(word, cell('quantity'), ctx);
    if (typeof sq === 'string') return sq;
    const day = cell('executedAt') ?? '';
    const at = timeOf(cell('time') !== undefined && !day.includes(';') ? `${day};${cell('time') ?? ''}` : day, ctx, 'Date/Time');
    if (typeof at !== 'string') return at.problem;
    const asset = cell('assetClass')?.toUpperCase();
    const price = amountOf(cell('price'), ctx.decimalComma);
    return {
      // Option symbols are OCC's with padding spaces: `AAPL  240119C00190000`.
      symbol: (cell('symbol') ?? '').replace(/\s+/g, '').toUpperCase(),
      ...sq,
      price: price?.digits ?? cell('price') ?? '',
      fee: absolute(cell('fee'), ctx.decimalComma),
      executedAt: at,
      externalId: cell('tradeId') || undefined,
      assetClass: asset === undefined || asset === '' ? undefined : (ASSET_CLASSES[asset] ?? asset.toLowerCase()),
      multiplier: absolute(cell('multiplier'), ctx.decimalComma),
    };
  },
});
