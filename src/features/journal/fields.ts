// A trade's fields as DESIGN §14 takes them, one check for the create route and the CSV import: a row
// of a file is refused for exactly what would refuse the same trade sent to POST …/trades.
import { isBoundedInstant } from '../../http/dates.ts';
import { calendarDate, zoneAt, type TimezoneChange } from '../accounts/timezones.ts';
import { canonicalUnits } from './decimal.ts';
import type { Side } from './fifo.ts';
import { defaultAssetClass, defaultMultiplier, isAssetClass, type AssetClass } from './instruments.ts';
import { MAX_EXTERNAL_ID, MAX_NOTE, MAX_TAG, MAX_TAGS, SYMBOL_PATTERN } from './schemas.ts';

/** How far ahead of the service's clock an execution may be (clock skew between broker and service). */
const MAX_FUTURE_MS = 5 * 60_000;

const SYMBOL = new RegExp(SYMBOL_PATTERN);

/** A trade as sent, every field text (the route's JSON, a CSV row's cells). */
export interface RawTrade {
  readonly symbol: string;
  readonly side: string;
  readonly quantity: string;
  readonly price: string;
  readonly fee?: string | undefined;
  readonly executedAt: string;
  readonly externalId?: string | undefined;
  readonly note?: string | undefined;
  readonly tags?: readonly string[] | undefined;
  readonly assetClass?: string | undefined;
  readonly multiplier?: string | undefined;
  readonly stopPrice?: string | null | undefined;
}

/** A trade checked and canonical: what is stored and compared. */
export interface TradeFields {
  readonly symbol: string;
  readonly side: Side;
  readonly quantity: string;
  readonly price: string;
  readonly fee: string;
  readonly executedAt: Date;
  readonly externalId: string | null;
  readonly note: string | null;
  readonly tags: readonly string[];
  readonly assetClass: AssetClass;
  readonly multiplier: string;
  readonly stopPrice: string | null;
}

export interface FieldProblem {
  readonly path: string;
  readonly message: string;
}

/**
 * Broker side words (case-insensitive, spaces folded): BOT / SLD are Interactive Brokers', B / S many
 * others'; a short sale and its cover are a sell and a buy (FIFO knows a short from the position).
 */
const SIDES: Readonly<Record<string, Side>> = {
  buy: 'buy',
  b: 'buy',
  bot: 'buy',
  bought: 'buy',
  'buy to cover': 'buy',
  cover: 'buy',
  'buy to open': 'buy',
  'buy to close': 'buy',
  sell: 'sell',
  s: 'sell',
  sld: 'sell',
  sold: 'sell',
  'sell short': 'sell',
  short: 'sell',
  ss: 'sell',
  'sell to open': 'sell',
  'sell to close': 'sell',
};

function sideOf(word: string): Side | undefined {
  return SIDES[word.trim().toLowerCase().replace(/\s+/g, ' ')];
}

export function checkTrade(raw: RawTrade, now: Date): TradeFields | FieldProblem {
  const problem = (path: string, message: string): FieldProblem => ({ path, message });
  if (!SYMBOL.test(raw.symbol)) return problem('/symbol', `must match ${SYMBOL_PATTERN}`);
  const side = sideOf(raw.side);
  if (side === undefined) return problem('/side', 'must be buy or sell (B, S, BOT, SLD)');
  const quantity = canonicalUnits(raw.quantity);
  if (quantity === undefined || quantity === '0') return problem('/quantity', 'must be a decimal > 0 with at most 12 integer and 8 fractional digits');
  const price = canonicalUnits(raw.price);
  if (price === undefined) return problem('/price', 'must be a decimal ≥ 0 with at most 12 integer and 8 fractional digits');
  const fee = raw.fee === undefined || raw.fee === '' ? '0' : canonicalUnits(raw.fee);
  if (fee === undefined) return problem('/fee', 'must be a decimal ≥ 0 with at most 12 integer and 8 fractional digits');
  if (!isBoundedInstant(raw.executedAt)) return problem('/executedAt', 'must be an ISO 8601 instant with Z or an offset, 1970–9999');
  const executedAt = new Date(raw.executedAt);
  if (executedAt.getTime() > now.getTime() + MAX_FUTURE_MS) return problem('/executedAt', 'must be at most 5 minutes in the future');
  const externalId = raw.externalId === undefined || raw.externalId === '' ? null : raw.externalId;
  if (externalId !== null && externalId.length > MAX_EXTERNAL_ID) return problem('/externalId', `must be at most ${MAX_EXTERNAL_ID} characters`);
  const note = raw.note === undefined || raw.note === '' ? null : raw.note;
  if (note !== null && note.length > MAX_NOTE) return problem('/note', `must be at most ${MAX_NOTE} characters`);
  const tags = raw.tags ?? [];
  if (tags.length > MAX_TAGS || tags.some((t) => t.length < 1 || t.length > MAX_TAG) || new Set(tags).size !== tags.length) {
    return problem('/tags', `at most ${MAX_TAGS} distinct tags of 1 to ${MAX_TAG} characters`);
  }
  const assetClass = raw.assetClass === undefined || raw.assetClass === '' ? defaultAssetClass(raw.symbol) : raw.assetClass.trim().toLowerCase();
  if (!isAssetClass(assetClass)) return problem('/assetClass', 'must be one of stock, future, option, forex, crypto, cfd');
  const given = raw.multiplier === undefined || raw.multiplier === '' ? undefined : canonicalUnits(raw.multiplier);
  if (given === '0' || (given === undefined && raw.multiplier !== undefined && raw.multiplier !== ''))
    return problem('/multiplier', 'must be a decimal > 0 with at most 12 integer and 8 fractional digits');
  const multiplier = given ?? defaultMultiplier(assetClass, raw.symbol);
  if (multiplier === undefined)
    return problem('/multiplier', `no contract multiplier is known for the future ${raw.symbol.slice(0, 24)}: give it (e.g. 50 for ES)`);
  const stopPrice = raw.stopPrice === undefined || raw.stopPrice === null || raw.stopPrice === '' ? null : canonicalUnits(raw.stopPrice);
  if (stopPrice === undefined) return problem('/stopPrice', 'must be a decimal ≥ 0 with at most 12 integer and 8 fractional digits');
  return { symbol: raw.symbol.toUpperCase(), side, quantity, price, fee, executedAt, externalId, note, tags, assetClass, multiplier, stopPrice };
}

export const isProblem = (v: TradeFields | FieldProblem): v is FieldProblem => 'path' in v;

/** The trading day of an instant: its date in the account's zone in force at that instant (DESIGN §9, §14). */
export function tradingDayOf(history: readonly TimezoneChange[], fallbackZone: string, at: Date): string {
  return calendarDate(at, zoneAt(history, at.getTime()) ?? fallbackZone);
}

const hourFormatters = new Map<string, Intl.DateTimeFormat>();

/**
 * The hour (0–23) of an instant in the account's zone in force then: the report's `hour` of a round
 * trip. Asked of a formatter of the hour alone (a replay asks it once a round trip, 30,000 times in a
 * back-dated import): a seventh of the time of reading every wall-clock field (`localHour`), the same
 * hour.
 */
export function hourOf(history: readonly TimezoneChange[], fallbackZone: string, at: Date): number {
  const zone = zoneAt(history, at.getTime()) ?? fallbackZone;
  let f = hourFormatters.get(zone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, hour: 'numeric', hourCycle: 'h23' });
    hourFormatters.set(zone, f);
  }
  return Number(f.format(at));
}

/** Whether a stored trade is the same fill as `fields` (an externalId sent again): the fill, not its note or tags. */
export type FillFields = Pick<TradeFields, 'symbol' | 'side' | 'quantity' | 'price' | 'fee' | 'assetClass' | 'multiplier'> & { executedAt: Date };

export function sameFill(stored: FillFields, fields: TradeFields): boolean {
  return (
    stored.symbol === fields.symbol &&
    stored.assetClass === fields.assetClass &&
    stored.multiplier === fields.multiplier &&
    stored.side === fields.side &&
    stored.quantity === fields.quantity &&
    stored.price === fields.price &&
    stored.fee === fields.fee &&
    stored.executedAt.getTime() === fields.executedAt.getTime()
  );
}
