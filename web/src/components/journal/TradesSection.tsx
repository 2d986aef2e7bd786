// The trades (fills) of the page's range and symbol, newest first, a page at a time.
import { useEffect } from 'preact/hooks';
import { api, must } from '../../api/client.ts';
import { Problem, useCursorPages } from '../../ui.tsx';
import type { Range } from './filters.ts';
import { LoadMore } from './LoadMore.tsx';
import { TradesTable } from './TradesTable.tsx';

/** Trades a page of the list. */
const PAGE = 50;

export function TradesSection({
  accountId,
  range,
  symbol,
  version,
  currency,
  timezone,
  onChanged,
}: {
  accountId: string;
  range: Range | undefined;
  symbol: string;
  version: number;
  currency: string;
  timezone: string;
  onChanged: () => void;
}) {
  const trades = useCursorPages((cursor) =>
    must(
      api.GET('/api/accounts/{id}/trades', {
        params: { path: { id: accountId }, query: { ...range, limit: PAGE, ...(symbol ? { symbol } : {}), ...(cursor ? { cursor } : {}) } },
      }),
    ),
  );
  useEffect(() => {
    if (range) void trades.reload();
  }, [accountId, range?.from, range?.to, symbol, version]);
  const empty = trades.loaded && trades.items.length === 0;
  return (
    <section aria-labelledby="trades-title">
      <h2 id="trades-title">Trades{symbol ? ` · ${symbol}` : ''}</h2>
      <Problem error={trades.error} />
      {empty && <p class="hint">{symbol ? `No ${symbol} trades in this range.` : 'No trades in this range. Import a file below, or choose a longer range.'}</p>}
      {trades.items.length > 0 && <TradesTable trades={trades.items} currency={currency} timezone={timezone} onChanged={onChanged} />}
      <LoadMore shown={trades.items.length} noun={['trade', 'trades']} more={trades.more} busy={trades.busy} />
    </section>
  );
}
