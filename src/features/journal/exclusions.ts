// DESIGN §17 what-ifs: `exclude=weekday:fri&exclude=tag:revenge` (or comma-separated) read into the
// repo's exclusions, each value in the form the report's groups use for its key.
import { AppError } from '../../http/errors.ts';
import type { TripDimension, TripExclusion } from './repo.ts';

const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
const HOLD_BUCKETS = ['<1m', '1m-5m', '5m-30m', '30m-2h', '2h-1d', '1d-1w', '>=1w'] as const;

/** The order the report lists a dimension's groups in (others: alphabetical, untagged last). */
export const GROUP_ORDER: Partial<Record<TripDimension, readonly string[]>> = {
  weekday: WEEKDAYS,
  side: ['long', 'short'],
  holdTime: HOLD_BUCKETS,
};

function bad(item: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `exclude ${item.slice(0, 60)}: ${message}`, { details: [{ path: '/exclude', message }] });
}

function valueOf(by: TripDimension, raw: string, item: string): string {
  const v = raw.trim();
  switch (by) {
    case 'weekday': {
      const day = v.toLowerCase().slice(0, 3);
      if (!(WEEKDAYS as readonly string[]).includes(day) || !/^[a-z]+$/i.test(v)) throw bad(item, 'weekday must be mon, tue, wed, thu, fri, sat or sun');
      return day;
    }
    case 'hour': {
      if (!/^\d{1,2}$/.test(v) || Number(v) > 23) throw bad(item, 'hour must be 0 to 23');
      return v.padStart(2, '0');
    }
    case 'side':
      if (v !== 'long' && v !== 'short') throw bad(item, 'side must be long or short');
      return v;
    case 'holdTime':
      if (!(HOLD_BUCKETS as readonly string[]).includes(v)) throw bad(item, `holdTime must be one of ${HOLD_BUCKETS.join(', ')}`);
      return v;
    case 'symbol':
      return v.toUpperCase();
    case 'tag':
      if (v.length < 1 || v.length > 32) throw bad(item, 'a tag is 1 to 32 characters');
      return v;
  }
}

const DIMENSIONS: readonly TripDimension[] = ['weekday', 'tag', 'symbol', 'hour', 'side', 'holdTime'];

/** The exclusions of a query (repeatable, or comma-separated), and their text as the response echoes it. */
export function exclusionsOf(query: string | readonly string[]): { items: TripExclusion[]; text: string[] } {
  const items: TripExclusion[] = [];
  const text: string[] = [];
  for (const part of (typeof query === 'string' ? [query] : query).flatMap((q) => q.split(','))) {
    if (part.trim() === '') continue;
    const colon = part.indexOf(':');
    const by = DIMENSIONS.find((d) => d === part.slice(0, colon).trim());
    if (colon < 0 || by === undefined) throw bad(part, `must be one of ${DIMENSIONS.map((d) => `${d}:…`).join(', ')}`);
    const value = valueOf(by, part.slice(colon + 1), part);
    items.push({ by, value });
    text.push(`${by}:${value}`);
  }
  return { items, text };
}
