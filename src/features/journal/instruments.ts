// DESIGN §17 instruments: what one unit of a quantity is worth. A future's contract multiplier comes
// from the exchange's specification when the trade does not state one; an equity option is 100 shares.

const ASSET_CLASSES = ['stock', 'future', 'option', 'forex', 'crypto', 'cfd'] as const;
export type AssetClass = (typeof ASSET_CLASSES)[number];

export const isAssetClass = (text: string): text is AssetClass => (ASSET_CLASSES as readonly string[]).includes(text);

/** Exchange contract multipliers by root (CME, CBOT, NYMEX, COMEX specifications). */
export const FUTURES_MULTIPLIERS: Readonly<Record<string, string>> = {
  ES: '50',
  MES: '5',
  NQ: '20',
  MNQ: '2',
  YM: '5',
  MYM: '0.5',
  RTY: '50',
  M2K: '5',
  CL: '1000',
  MCL: '100',
  GC: '100',
  MGC: '10',
  SI: '5000',
  ZB: '1000',
  ZN: '1000',
  '6E': '125000',
};

const OPTION_MULTIPLIER = '100';

/** Futures month codes, January to December. */
export const MONTH_CODES = 'FGHJKMNQUVXZ';

/**
 * The root of a futures symbol: `ES`, `/ES`, a contract month `ESZ5`, `MESZ25`, `/ESZ25`, or the
 * `ES 12-25` / `ES-12-25` form. Undefined when the symbol names no root of the table.
 */
export function futuresRoot(symbol: string): string | undefined {
  const s = symbol.trim().toUpperCase().replace(/^\//, '');
  if (FUTURES_MULTIPLIERS[s] !== undefined) return s;
  const month = /^([A-Z0-9]{1,4}?)[FGHJKMNQUVXZ]\d{1,2}$/.exec(s) ?? /^([A-Z0-9]{1,4})[ -]\d{2}-\d{2}$/.exec(s);
  const root = month?.[1];
  return root !== undefined && FUTURES_MULTIPLIERS[root] !== undefined ? root : undefined;
}

/** The asset class a trade gets when it states none: thinkorswim writes futures with a leading `/`. */
export const defaultAssetClass = (symbol: string): AssetClass => (symbol.startsWith('/') ? 'future' : 'stock');

/**
 * The multiplier of a trade that states none: a future's from the table (undefined when its root is
 * not there: never a silent 1), an option's 100, anything else 1.
 */
export function defaultMultiplier(assetClass: AssetClass, symbol: string): string | undefined {
  if (assetClass === 'future') {
    const root = futuresRoot(symbol);
    return root === undefined ? undefined : FUTURES_MULTIPLIERS[root];
  }
  return assetClass === 'option' ? OPTION_MULTIPLIER : '1';
}
