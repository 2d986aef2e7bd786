// The figures of the Journal page for its filters. The journal and the report take a range and what-if
// exclusions but no symbol: a symbol is shown as the what-if that leaves only its round trips (every
// other symbol with a round trip in the range excluded) — the service's own figures, never a sum of ours.
import { useMemo } from 'preact/hooks';
import { api, must, type Schemas } from '../../api/client.ts';
import { useLoad } from '../../ui.tsx';
import type { JournalFilters, Range } from './filters.ts';

/** The service's longest exclusion list. */
const MAX_EXCLUDE = 20;

export type Journal = Schemas['Journal'];
export type Report = Schemas['JournalReport'];

export interface Scope {
  /** Exclusions that narrow the figures to the symbol (none without a symbol). */
  readonly exclude: readonly string[];
  /** False: the symbol closed no round trip in the range (its figures are empty). */
  readonly found: boolean;
  /** True: too many other symbols to exclude; the figures stay the account's. */
  readonly tooWide: boolean;
}

const EVERYTHING: Scope = { exclude: [], found: true, tooWide: false };

export function useJournalData(accountId: string, range: Range | undefined, f: JournalFilters, version: number) {
  const path = { id: accountId };
  const scoped = useMemo(async (): Promise<Scope | undefined> => {
    if (!range) return undefined;
    if (!f.symbol) return EVERYTHING;
    const bySymbol = await must(api.GET('/api/accounts/{id}/journal/report', { params: { path, query: { ...range, by: 'symbol' } } }));
    const others = bySymbol.groups.flatMap((g) => (g.key === null || g.key === f.symbol ? [] : [`symbol:${g.key}`]));
    const found = others.length < bySymbol.groups.length;
    if (others.length + f.exclude.length > MAX_EXCLUDE) return { exclude: [], found, tooWide: true };
    return { exclude: others, found, tooWide: false };
  }, [accountId, range?.from, range?.to, f.symbol, version]);

  const scope = useLoad(() => scoped, [scoped]);
  const journal = useLoad(async () => {
    const s = await scoped;
    if (!range || !s) return undefined;
    const exclude = s.exclude.length > 0 ? [...s.exclude] : undefined;
    return must(api.GET('/api/accounts/{id}/journal', { params: { path, query: { ...range, ...(exclude ? { exclude } : {}) } } }));
  }, [scoped]);
  const report = useLoad(async () => {
    const s = await scoped;
    if (!range || !s) return undefined;
    const exclude = s.exclude.length > 0 ? [...s.exclude] : undefined;
    return must(api.GET('/api/accounts/{id}/journal/report', { params: { path, query: { ...range, by: f.by, ...(exclude ? { exclude } : {}) } } }));
  }, [scoped, f.by]);
  const whatIf = useLoad(async () => {
    const s = await scoped;
    if (!range || !s || f.exclude.length === 0) return undefined;
    const exclude = [...s.exclude, ...f.exclude];
    return must(api.GET('/api/accounts/{id}/journal', { params: { path, query: { ...range, exclude } } }));
  }, [scoped, f.exclude.join('\n')]);
  return { scope, journal, report, whatIf };
}
