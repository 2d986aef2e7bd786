// What the Journal page shows lives in its address: the range, the symbol, the report's grouping and the
// what-if's exclusions. A reload, a shared link and back / forward all give the same page.
import { navigate, useLocation } from '../../router.ts';
import { addDays } from './format.ts';

export const GROUPINGS = ['symbol', 'tag', 'side', 'weekday', 'hour', 'holdTime'] as const;
export type By = (typeof GROUPINGS)[number];

export interface JournalFilters {
  /** Absent: the 30 trading days up to the account's today. */
  readonly from: string | undefined;
  readonly to: string | undefined;
  /** Upper case; '' for every symbol. */
  readonly symbol: string;
  readonly by: By;
  /** What-if exclusions as the service reads them ("weekday:fri"). */
  readonly exclude: readonly string[];
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const isBy = (v: string | null): v is By => GROUPINGS.some((g) => g === v);

function readFilters(query: URLSearchParams): JournalFilters {
  const day = (name: string) => {
    const v = query.get(name);
    return v && DAY.test(v) ? v : undefined;
  };
  const by = query.get('by');
  return {
    from: day('from'),
    to: day('to'),
    symbol: (query.get('symbol') ?? '').trim().toUpperCase(),
    by: isBy(by) ? by : 'symbol',
    exclude: [...new Set(query.getAll('exclude').filter((e) => /^[a-zA-Z]+:.+$/.test(e)))],
  };
}

function filtersQuery(f: JournalFilters): string {
  const q = new URLSearchParams();
  if (f.from) q.set('from', f.from);
  if (f.to) q.set('to', f.to);
  if (f.symbol) q.set('symbol', f.symbol);
  if (f.by !== 'symbol') q.set('by', f.by);
  for (const e of f.exclude) q.append('exclude', e);
  const text = q.toString();
  return text ? `?${text}` : '';
}

/** The page's filters and a way to change them (a new history entry, so Back undoes it). */
export function useJournalFilters(): [JournalFilters, (change: Partial<JournalFilters>) => void] {
  const { path, query } = useLocation();
  const filters = readFilters(query);
  return [filters, (change) => navigate(`${path}${filtersQuery({ ...filters, ...change })}`)];
}

export interface Range {
  readonly from: string;
  readonly to: string;
}

export const lastDays = (to: string, n: number): Range => ({ from: addDays(to, -(n - 1)), to });
