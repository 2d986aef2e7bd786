// The trading journal of one account (DESIGN §14, §17): totals of a range of trading days as cards, daily
// net P&L as a chart and a calendar, reports with a what-if, round trips with R, open positions, the
// trades (paged, notes and tags), a broker file's import with its dry run, and export. The range and the
// symbol (in the address) narrow all of it. Every figure is the service's; the page formats, it never
// adds money up.
import { useState } from 'preact/hooks';
import { api, must } from '../api/client.ts';
import { DailyPnlChart } from '../components/journal/DailyPnlChart.tsx';
import { ExportButton } from '../components/journal/ExportButton.tsx';
import { OpenPositions, TotalsCards } from '../components/journal/Figures.tsx';
import { FiltersForm } from '../components/journal/FiltersForm.tsx';
import { lastDays, useJournalFilters } from '../components/journal/filters.ts';
import { day } from '../components/journal/format.ts';
import { ImportTrades } from '../components/journal/ImportTrades.tsx';
import { PnlCalendar } from '../components/journal/PnlCalendar.tsx';
import { ReportSection } from '../components/journal/ReportSection.tsx';
import { RoundTrips } from '../components/journal/RoundTrips.tsx';
import { TradesSection } from '../components/journal/TradesSection.tsx';
import { useJournalData } from '../components/journal/use-journal.ts';
import { Page, Problem, useLoad } from '../ui.tsx';
import '../components/journal/journal.css';

export function JournalPage({ accountId }: { accountId: string }) {
  const path = { id: accountId };
  const account = useLoad(() => must(api.GET('/api/accounts/{id}', { params: { path } })), [accountId]);
  const today = useLoad(() => must(api.GET('/api/accounts/{id}/trading-day', { params: { path } })), [accountId]);
  const [filters, setFilters] = useJournalFilters();
  const range = filters.from && filters.to ? { from: filters.from, to: filters.to } : today.data ? lastDays(today.data.tradingDay, 30) : undefined;
  // Bumped by an import, an edit or a delete: everything is read again.
  const [version, setVersion] = useState(0);
  const changed = () => setVersion((v) => v + 1);
  const { journal, report, whatIf } = useJournalData(accountId, range, filters, version);

  const a = account.data;
  const j = journal.data;
  const currency = j?.currency ?? a?.currency ?? 'USD';
  const timezone = a?.timezone ?? today.data?.timezone ?? 'UTC';
  const symbol = filters.symbol;
  const positions = j?.openPositions;
  // The symbol closed no round trip in the range: its figures would be empty.
  const missing = symbol !== '' && j !== undefined && j.totals.roundTrips === 0;
  return (
    <div class="jr-page">
      <Page
        title={a ? `Journal: ${a.name}` : 'Journal'}
        actions={<ExportButton accountId={accountId} name={a?.name} range={range} symbol={symbol} stamp={today.data?.tradingDay} />}
      >
        <p class="hint jr-sub">
          <a href="/accounts">Accounts</a>
          {a ? ` · ${a.currency} · trading days in ${a.timezone}` : ' '}
        </p>
        <Problem error={account.error ?? today.error} />
        <FiltersForm range={range} symbol={symbol} today={today.data?.tradingDay} onApply={(r, s) => setFilters({ ...r, symbol: s })} />
        <Problem error={journal.error} />
        <section aria-labelledby="totals-title">
          <h2 id="totals-title" class="sr-only">
            {range ? `Totals from ${day(range.from)} to ${day(range.to)}${symbol ? `, ${symbol}` : ''}` : 'Totals'}
          </h2>
          {missing ? (
            <p class="hint jr-missing">No {symbol} round trip closed in this range. Its trades, if any, are listed below.</p>
          ) : (
            <TotalsCards totals={j?.totals} currency={currency} balance={j?.balance} />
          )}
        </section>
        {!missing && (
          <>
            <section aria-labelledby="chart-title">
              <h2 id="chart-title">Daily net P&L{symbol ? ` · ${symbol}` : ''}</h2>
              <DailyPnlChart days={j?.days} currency={currency} from={range?.from ?? ''} to={range?.to ?? ''} />
            </section>
            <PnlCalendar days={j?.days} currency={currency} range={range} />
            <ReportSection report={report} whatIf={whatIf} filters={filters} scoped={symbol !== ''} currency={currency} onChange={setFilters} />
          </>
        )}
        <RoundTrips accountId={accountId} range={range} symbol={symbol} version={version} currency={currency} timezone={timezone} />
        <section aria-labelledby="positions-title">
          <h2 id="positions-title">Open positions</h2>
          <p class="hint">After the last fill on or before {range ? day(range.to) : 'the range’s end'}.</p>
          {positions && <OpenPositions positions={positions} currency={currency} timezone={timezone} caption="Open positions table" />}
        </section>
        <TradesSection accountId={accountId} range={range} symbol={symbol} version={version} currency={currency} timezone={timezone} onChanged={changed} />
        <ImportTrades accountId={accountId} timezone={a?.timezone} currency={currency} onImported={changed} />
      </Page>
    </div>
  );
}
