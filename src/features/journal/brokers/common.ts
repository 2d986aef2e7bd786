// What several layouts read alike: a side from a word or a signed quantity, a time, a futures contract.
import { MONTH_CODES } from '../instruments.ts';
import { amountOf, isoTime, type Amount } from './values.ts';
import type { ReadContext } from './layout.ts';

const BUYS = new Set(['buy', 'b', 'bot', 'bought', 'buy to cover', 'cover', 'buy to open', 'buy to close', 'long']);
const SELLS = new Set(['sell', 's', 'sld', 'sold', 'sell short', 'short', 'ss', 'sell to open', 'sell to close']);

/** A side word as `buy` / `sell`, or the word itself (the journal's check then refuses the row). */
export function sideWord(word: string): string {
  const w = word.trim().toLowerCase().replace(/\s+/g, ' ');
  return BUYS.has(w) ? 'buy' : SELLS.has(w) ? 'sell' : word.trim();
}

/**
 * The side and size of a fill from a side word and a quantity that may be signed (brokers write sells
 * as negative quantities): a sign alone gives the side; a sign against the word is a problem.
 */
export function sideAndQuantity(word: string | undefined, quantity: string | undefined, ctx: ReadContext): { side: string; quantity: string } | string {
  const q: Amount | undefined = amountOf(quantity, ctx.decimalComma);
  if (q === undefined) return `quantity: ${JSON.stringify((quantity ?? '').slice(0, 40))} is not a number`;
  const fromSign = q.negative ? 'sell' : 'buy';
  if (word === undefined || word.trim() === '') return { side: fromSign, quantity: q.digits };
  const side = sideWord(word);
  if (q.negative && side === 'buy') return `side: ${word.trim()} with a negative quantity`;
  return { side, quantity: q.digits };
}

/** A cell's time, or a problem naming it. */
export function timeOf(text: string | undefined, ctx: ReadContext, column: string): string | { problem: string } {
  const iso = text === undefined || text === '' ? undefined : isoTime(text, ctx.dateOrder);
  return iso ?? { problem: `${column}: ${JSON.stringify((text ?? '').slice(0, 40))} is not a date and time this import reads` };
}

/** NinjaTrader's `ES 03-24` as a contract symbol `ESH24`; other symbols as written, upper case. */
export function contractSymbol(instrument: string): string {
  const m = /^([A-Za-z0-9]{1,4})\s+(\d{2})-(\d{2})$/.exec(instrument.trim());
  const month = m ? MONTH_CODES[Number(m[2]) - 1] : undefined;
  return m && month !== undefined ? `${(m[1] ?? '').toUpperCase()}${month}${m[3] ?? ''}` : instrument.trim().toUpperCase();
}
