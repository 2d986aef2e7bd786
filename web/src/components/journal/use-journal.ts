// The figures of the Journal page for its filters: the journal, the report and the what-if, each asked
// of the service for the range and the symbol (the service's own figures, never a sum of ours).
import { api, must, type Schemas } from '../../api/client.ts';
import { useLoad } from '../../ui.tsx';
import type { JournalFilters, Range } from './filters.ts';

export type Journal = Schemas['Journal'];
export type Report = Schemas['JournalReport'];

export function useJournalData(accountId: string, range: Range | undefined, f: JournalFilters, version: number) {
  const path = { id: accountId };
  const symbol = f.symbol ? { symbol: f.symbol } : {};
  const journal = useLoad(async () => {
    if (!range) return undefined;
    return must(api.GET('/api/accounts/{id}/journal', { params: { path, query: { ...range, ...symbol } } }));
  }, [accountId, range?.from, range?.to, f.symbol, version]);
  const report = useLoad(async () => {
    if (!range) return undefined;
    return must(api.GET('/api/accounts/{id}/journal/report', { params: { path, query: { ...range, ...symbol, by: f.by } } }));
  }, [accountId, range?.from, range?.to, f.symbol, f.by, version]);
  const whatIf = useLoad(async () => {
    if (!range || f.exclude.length === 0) return undefined;
    return must(api.GET('/api/accounts/{id}/journal', { params: { path, query: { ...range, ...symbol, exclude: [...f.exclude] } } }));
  }, [accountId, range?.from, range?.to, f.symbol, f.exclude.join('\n'), version]);
  return { journal, report, whatIf };
}
