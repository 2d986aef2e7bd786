// Round trips (a symbol's position from flat back to flat) closed in the page's range, newest close first,
// with what each made in money and in R (net P&L over the risk its opening fill's stop planned).
import { useEffect } from 'preact/hooks';
import { api, must, type Schemas } from '../../api/client.ts';
import { Problem, TableHead, useCursorPages } from '../../ui.tsx';
import { Money, Price, SymbolCell } from './Figures.tsx';
import type { Range } from './filters.ts';
import { dateTimeIn, decimal, holdTime, rMultiple } from './format.ts';
import { LoadMore } from './LoadMore.tsx';

type RoundTrip = Schemas['RoundTrip'];

const PAGE = 50;

const COLUMNS = [
  'Symbol',
  'Side',
  'Opened',
  'Closed',
  'Hold',
  { label: 'Quantity', num: true },
  { label: 'Entry average', num: true },
  { label: 'Exit average', num: true },
  { label: 'Net P&L', num: true },
  { label: 'R', num: true },
  'Tags',
];

export function RoundTrips({
  accountId,
  range,
  symbol,
  version,
  currency,
  timezone,
}: {
  accountId: string;
  range: Range | undefined;
  symbol: string;
  version: number;
  currency: string;
  timezone: string;
}) {
  const trips = useCursorPages((cursor) =>
    must(
      api.GET('/api/accounts/{id}/round-trips', {
        params: { path: { id: accountId }, query: { ...range, limit: PAGE, ...(symbol ? { symbol } : {}), ...(cursor ? { cursor } : {}) } },
      }),
    ),
  );
  useEffect(() => {
    if (range) void trips.reload();
  }, [accountId, range?.from, range?.to, symbol, version]);
  return (
    <section aria-labelledby="trips-title">
      <h2 id="trips-title">Round trips{symbol ? ` · ${symbol}` : ''}</h2>
      <p class="hint">Flat to flat, by the day they closed. R is net P&L over the risk the opening fill's stop planned.</p>
      <Problem error={trips.error} />
      {trips.loaded && trips.items.length === 0 && <p class="hint">No round trip closed in this range.</p>}
      {trips.items.length > 0 && (
        <div class="jr-scroll" role="region" aria-label="Round trips table" tabIndex={0}>
          <table class="table compact">
            <caption class="sr-only">Round trips, newest close first</caption>
            <TableHead columns={COLUMNS} />
            <tbody>
              {trips.items.map((t) => (
                <TripRow key={t.id} trip={t} currency={currency} timezone={timezone} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <LoadMore shown={trips.items.length} noun={['round trip', 'round trips']} more={trips.more} busy={trips.busy} />
    </section>
  );
}

function TripRow({ trip: t, currency, timezone }: { trip: RoundTrip; currency: string; timezone: string }) {
  return (
    <tr data-trip={t.id}>
      <SymbolCell symbol={t.symbol} assetClass={t.assetClass} multiplier={t.multiplier} />
      <td>{t.side === 'long' ? 'Long' : 'Short'}</td>
      <td>{dateTimeIn(t.openedAt, timezone)}</td>
      <td>{dateTimeIn(t.closedAt, timezone)}</td>
      <td>{holdTime(t.holdSeconds)}</td>
      <td class="num">{decimal(t.maxQuantity)}</td>
      <td class="num">
        <Price value={t.entryAverage} currency={currency} />
      </td>
      <td class="num">
        <Price value={t.exitAverage} currency={currency} />
      </td>
      <td class="num" title={`Realized ${t.realizedPnl}, fees ${t.fees}`}>
        <Money value={t.netPnl} currency={currency} signed tone />
      </td>
      <td class="num">{rMultiple(t.rMultiple)}</td>
      <td>
        {t.tags.length > 0 && (
          <ul class="jr-tags" aria-label="Tags">
            {t.tags.map((tag) => (
              <li key={tag}>{tag}</li>
            ))}
          </ul>
        )}
      </td>
    </tr>
  );
}
