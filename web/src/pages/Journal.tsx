// The trading journal of one account (DESIGN §14, issue 28): totals of a range of trading days as cards,
// daily net P&L as a chart, open positions, the trades (filtered, paged, notes and tags), CSV import with
// its report, and export. Every figure is the service's; the page formats, it never adds money up.
import { useEffect, useState } from 'preact/hooks';
import { api, authorizedFetch, errorOf, must } from '../api/client.ts';
import { DailyPnlChart } from '../components/journal/DailyPnlChart.tsx';
import { OpenPositions, TotalsCards } from '../components/journal/Figures.tsx';
import { ImportTrades } from '../components/journal/ImportTrades.tsx';
import { TradesTable } from '../components/journal/TradesTable.tsx';
import { addDays, day } from '../components/journal/format.ts';
import { Page, Problem, useAction, useCursorPages, useLoad } from '../ui.tsx';
import '../components/journal/journal.css';

/** Trades a page of the list. */
const PAGE = 50;
/** The service's longest range: three years, 1,096 days apart at most. */
const PRESETS = [
  { label: '30 days', days: 30 },
  { label: '1 year', days: 365 },
  { label: '3 years', days: 1096 },
];

interface Range {
  readonly from: string;
  readonly to: string;
}

const lastDays = (to: string, n: number): Range => ({ from: addDays(to, -(n - 1)), to });
const slug = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '') || 'account';

export function JournalPage({ accountId }: { accountId: string }) {
  const path = { id: accountId };
  const account = useLoad(() => must(api.GET('/api/accounts/{id}', { params: { path } })), [accountId]);
  const today = useLoad(() => must(api.GET('/api/accounts/{id}/trading-day', { params: { path } })), [accountId]);
  const [chosen, setChosen] = useState<Range | undefined>();
  const range = chosen ?? (today.data ? lastDays(today.data.tradingDay, 30) : undefined);
  const [symbol, setSymbol] = useState('');
  // Bumped by an import, an edit or a delete: the journal and the trades are read again.
  const [version, setVersion] = useState(0);
  const changed = () => setVersion((v) => v + 1);

  const journal = useLoad(
    async () => (range ? must(api.GET('/api/accounts/{id}/journal', { params: { path, query: range } })) : undefined),
    [accountId, range?.from, range?.to, version],
  );
  const trades = useCursorPages((cursor) =>
    must(
      api.GET('/api/accounts/{id}/trades', {
        params: { path, query: { from: range?.from, to: range?.to, limit: PAGE, ...(symbol ? { symbol } : {}), ...(cursor ? { cursor } : {}) } },
      }),
    ),
  );
  useEffect(() => {
    if (range) void trades.reload();
  }, [accountId, range?.from, range?.to, symbol, version]);

  const exporting = useAction();
  const exportCsv = () =>
    exporting.run(async () => {
      const response = await authorizedFetch(`/api/accounts/${encodeURIComponent(accountId)}/trades/export`);
      if (!response.ok) throw await errorOf(response);
      const url = URL.createObjectURL(await response.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = `trades-${slug(account.data?.name ?? '')}-${today.data?.tradingDay ?? 'all'}.csv`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    });

  const a = account.data;
  const j = journal.data;
  const currency = j?.currency ?? a?.currency ?? 'USD';
  const timezone = a?.timezone ?? today.data?.timezone ?? 'UTC';
  return (
    <div class="jr-page">
      <Page
        title={a ? `Journal: ${a.name}` : 'Journal'}
        actions={
          <button type="button" class="secondary" onClick={exportCsv} disabled={exporting.busy || !a}>
            {exporting.busy ? 'Exporting…' : 'Export CSV'}
          </button>
        }
      >
        <p class="hint jr-sub">
          <a href="/accounts">Accounts</a>
          {a && (
            <>
              {' '}
              · {a.currency} · trading days in {a.timezone}
            </>
          )}
        </p>
        <Problem error={account.error ?? today.error ?? exporting.error} />
        {range && <RangeForm range={range} today={today.data?.tradingDay} onApply={setChosen} />}
        <Problem error={journal.error} />
        {!j && journal.loading && <p class="hint">Loading the journal…</p>}
        {j && (
          <>
            <section aria-labelledby="totals-title">
              <h2 id="totals-title" class="sr-only">
                Totals from {day(j.from)} to {day(j.to)}
              </h2>
              <TotalsCards totals={j.totals} currency={j.currency} balance={j.balance} />
            </section>
            <section aria-labelledby="chart-title">
              <h2 id="chart-title">Daily net P&L</h2>
              <DailyPnlChart days={j.days} currency={j.currency} from={j.from} to={j.to} />
            </section>
            <section aria-labelledby="positions-title">
              <h2 id="positions-title">Open positions</h2>
              <p class="hint">After the last fill on or before {day(j.to)}.</p>
              <OpenPositions positions={j.openPositions} currency={j.currency} timezone={timezone} caption="Open positions table" />
            </section>
          </>
        )}
        <section aria-labelledby="trades-title">
          <div class="jr-section-head">
            <h2 id="trades-title">Trades</h2>
            <SymbolFilter symbol={symbol} onApply={setSymbol} />
          </div>
          <Problem error={trades.error} />
          {trades.items.length === 0 && !trades.busy && (
            <p class="hint">{symbol ? `No ${symbol} trades in this range.` : 'No trades in this range. Import a CSV file below, or choose a longer range.'}</p>
          )}
          {trades.items.length > 0 && <TradesTable trades={trades.items} currency={currency} timezone={timezone} onChanged={changed} />}
          <div class="jr-more">
            {trades.items.length > 0 && (
              <span class="hint" role="status">
                {trades.items.length} trade{trades.items.length === 1 ? '' : 's'} shown{trades.more ? '' : ' (all of the range)'}
              </span>
            )}
            {trades.more && (
              <button type="button" class="secondary" onClick={trades.more} disabled={trades.busy}>
                Load more trades
              </button>
            )}
          </div>
        </section>
        <ImportTrades accountId={accountId} onImported={changed} />
      </Page>
    </div>
  );
}

/** The trading days the totals, the chart and the trades cover. */
function RangeForm({ range, today, onApply }: { range: Range; today: string | undefined; onApply: (r: Range) => void }) {
  const [from, setFrom] = useState(range.from);
  const [to, setTo] = useState(range.to);
  useEffect(() => {
    setFrom(range.from);
    setTo(range.to);
  }, [range.from, range.to]);
  return (
    <form
      class="jr-filters"
      aria-label="Trading days"
      onSubmit={(e) => {
        e.preventDefault();
        if (from && to) onApply({ from, to });
      }}
    >
      <label>
        From
        <input type="date" required value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />
      </label>
      <label>
        To
        <input type="date" required value={to} min={from} onChange={(e) => setTo(e.currentTarget.value)} />
      </label>
      <button type="submit">Show</button>
      {today && (
        <span class="actions" role="group" aria-label="Quick ranges">
          {PRESETS.map((p) => (
            <button key={p.days} type="button" class="secondary small" onClick={() => onApply(lastDays(today, p.days))}>
              <span class="sr-only">Last </span>
              {p.label}
            </button>
          ))}
        </span>
      )}
    </form>
  );
}

/** Narrows the trades list to one symbol (the totals stay the whole account's). */
function SymbolFilter({ symbol, onApply }: { symbol: string; onApply: (s: string) => void }) {
  const [text, setText] = useState(symbol);
  return (
    <form
      class="jr-filters"
      aria-label="Filter trades"
      onSubmit={(e) => {
        e.preventDefault();
        onApply(text.trim().toUpperCase());
      }}
    >
      <label>
        Symbol
        <input class="symbol" value={text} maxLength={24} placeholder="All" onInput={(e) => setText(e.currentTarget.value)} />
      </label>
      <button type="submit" class="secondary">
        Filter
      </button>
      {symbol && (
        <button
          type="button"
          class="secondary"
          onClick={() => {
            setText('');
            onApply('');
          }}
        >
          Show all
        </button>
      )}
    </form>
  );
}
