// Export of the trades the page shows (its range and symbol) as the service's CSV: fetched with the token
// (a plain link cannot send it) and handed to the browser as a download.
import { authorizedFetch, errorOf } from '../../api/client.ts';
import { Problem, useAction } from '../../ui.tsx';
import type { Range } from './filters.ts';

const slug = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '') || 'account';

/** The export's address for the page's filters. */
function exportUrl(accountId: string, range: Range | undefined, symbol: string): string {
  const q = new URLSearchParams();
  if (range) {
    q.set('from', range.from);
    q.set('to', range.to);
  }
  if (symbol) q.set('symbol', symbol);
  const text = q.toString();
  return `/api/accounts/${encodeURIComponent(accountId)}/trades/export${text ? `?${text}` : ''}`;
}

export function ExportButton({
  accountId,
  name,
  range,
  symbol,
  stamp,
}: {
  accountId: string;
  name: string | undefined;
  range: Range | undefined;
  symbol: string;
  stamp: string | undefined;
}) {
  const exporting = useAction();
  const run = () =>
    exporting.run(async () => {
      const response = await authorizedFetch(exportUrl(accountId, range, symbol));
      if (!response.ok) throw await errorOf(response);
      const url = URL.createObjectURL(await response.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = `trades-${slug(name ?? '')}${symbol ? `-${slug(symbol)}` : ''}-${range ? `${range.from}-to-${range.to}` : (stamp ?? 'all')}.csv`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    });
  return (
    <div class="jr-export">
      <button type="button" class="secondary" onClick={run} disabled={exporting.busy || !name || !range}>
        {exporting.busy ? 'Exporting…' : 'Export CSV'}
      </button>
      <Problem error={exporting.error} />
    </div>
  );
}
