// Reports: the range's round trips grouped by symbol, tag, side, weekday, hour or holding time, each group
// with its figures; a group switched off is a what-if ("without Fridays"), whose totals the service
// computes over the round trips that remain and the page sets beside the actual ones.
import { Problem, TableHead, type Loaded } from '../../ui.tsx';
import { Money, type Totals } from './Figures.tsx';
import { GROUPINGS, type By, type JournalFilters } from './filters.ts';
import { decimal, percent, rMultiple } from './format.ts';
import type { Journal, Report } from './use-journal.ts';

const BY_LABELS: Record<By, string> = { symbol: 'Symbol', tag: 'Tag', side: 'Side', weekday: 'Weekday', hour: 'Hour opened', holdTime: 'Holding time' };
const WEEKDAYS: Record<string, string> = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' };

/** A group's key in words: "Friday", "15:00–15:59", "Long", "Untagged". */
function groupLabel(by: string, key: string | null): string {
  if (key === null) return 'Untagged';
  if (by === 'weekday') return WEEKDAYS[key] ?? key;
  if (by === 'hour') return `${key}:00–${key}:59`;
  if (by === 'side') return key === 'long' ? 'Long' : 'Short';
  return key;
}

/** An exclusion in words, after "without": "Fridays", "tag revenge", "shorts". */
function exclusionLabel(item: string): string {
  const at = item.indexOf(':');
  const by = item.slice(0, at);
  const key = item.slice(at + 1);
  if (by === 'weekday') return `${WEEKDAYS[key] ?? key}s`;
  if (by === 'side') return key === 'long' ? 'longs' : 'shorts';
  if (by === 'hour') return `trips opened ${groupLabel('hour', key)}`;
  if (by === 'holdTime') return `holds of ${key}`;
  return `${by} ${key}`;
}

export function ReportSection({
  report,
  whatIf,
  filters,
  scoped,
  currency,
  onChange,
}: {
  report: Loaded<Report | undefined>;
  whatIf: Loaded<Journal | undefined>;
  filters: JournalFilters;
  scoped: boolean;
  currency: string;
  onChange: (change: Partial<JournalFilters>) => void;
}) {
  const r = report.data;
  const excluded = new Set(filters.exclude);
  const toggle = (item: string, on: boolean) => onChange({ exclude: on ? filters.exclude.filter((e) => e !== item) : [...filters.exclude, item] });
  return (
    <section aria-labelledby="report-title">
      <div class="jr-section-head">
        <h2 id="report-title">Reports</h2>
        <div class="jr-inline">
          <label for="report-by">Group by</label>
          <select id="report-by" value={filters.by} onChange={(e) => onChange({ by: e.currentTarget.value as By })}>
            {GROUPINGS.map((g) => (
              <option key={g} value={g}>
                {BY_LABELS[g]}
              </option>
            ))}
          </select>
        </div>
      </div>
      <p class="hint">Round trips closed in the range, by their opening. Untick a group to see the range without it.</p>
      <Problem error={report.error ?? whatIf.error} />
      {filters.exclude.length > 0 && (
        <WhatIf actual={r?.totals} whatIf={whatIf.data} exclude={filters.exclude} scoped={scoped} currency={currency} onPutBack={(e) => toggle(e, true)} />
      )}
      {r && r.groups.length === 0 && <p class="hint">No round trip closed in this range.</p>}
      {r && r.groups.length > 0 && (
        <div class="jr-scroll" role="region" aria-label="Report table" tabIndex={0}>
          <table class="table compact jr-report-table">
            <caption class="sr-only">Round trips by {BY_LABELS[r.by as By] ?? r.by}</caption>
            <TableHead
              columns={[
                { label: 'Included', srOnly: true },
                BY_LABELS[r.by as By] ?? r.by,
                { label: 'Round trips', num: true },
                { label: 'Win rate', num: true },
                { label: 'Net P&L', num: true },
                { label: 'Expectancy', num: true },
                { label: 'Profit factor', num: true },
                { label: 'Average R', num: true },
              ]}
            />
            <tbody>
              {r.groups.map((g) => {
                const label = groupLabel(r.by, g.key);
                const item = g.key === null ? undefined : `${r.by}:${g.key}`;
                return (
                  <tr key={g.key ?? ''} class={item && excluded.has(item) ? 'jr-off' : undefined}>
                    <td>
                      {item && (
                        <input
                          type="checkbox"
                          checked={!excluded.has(item)}
                          aria-label={`Include ${label}`}
                          onChange={(e) => toggle(item, e.currentTarget.checked)}
                        />
                      )}
                    </td>
                    <th scope="row">{label}</th>
                    <GroupCells totals={g.totals} currency={currency} />
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function GroupCells({ totals: t, currency }: { totals: Totals; currency: string }) {
  return (
    <>
      <td class="num">{t.roundTrips}</td>
      <td class="num">{percent(t.winRate)}</td>
      <td class="num">
        <Money value={t.netPnl} currency={currency} signed tone />
      </td>
      <td class="num">
        <Money value={t.expectancy} currency={currency} signed />
      </td>
      <td class="num">{t.profitFactor === null ? '—' : decimal(t.profitFactor)}</td>
      <td class="num">{rMultiple(t.averageR ?? null)}</td>
    </>
  );
}

const COMPARED: { key: keyof Totals; label: string; kind: 'money' | 'count' | 'ratio' | 'percent' | 'r' }[] = [
  { key: 'netPnl', label: 'Net P&L', kind: 'money' },
  { key: 'roundTrips', label: 'Round trips', kind: 'count' },
  { key: 'winRate', label: 'Win rate', kind: 'percent' },
  { key: 'expectancy', label: 'Expectancy', kind: 'money' },
  { key: 'profitFactor', label: 'Profit factor', kind: 'ratio' },
  { key: 'averageR', label: 'Average R', kind: 'r' },
  { key: 'maxDrawdown', label: 'Max drawdown', kind: 'money' },
];

function Figure({ totals, row, currency }: { totals: Totals | undefined; row: (typeof COMPARED)[number]; currency: string }) {
  if (!totals) return <>…</>;
  const v = totals[row.key];
  if (row.kind === 'count') return <>{String(v)}</>;
  if (row.kind === 'percent') return <>{percent(typeof v === 'string' ? v : null)}</>;
  if (row.kind === 'r') return <>{rMultiple(typeof v === 'string' ? v : null)}</>;
  if (row.kind === 'ratio') return <>{typeof v === 'string' ? decimal(v) : '—'}</>;
  return <Money value={typeof v === 'string' ? v : null} currency={currency} signed={row.key !== 'maxDrawdown'} tone={row.key === 'netPnl'} />;
}

function WhatIf({
  actual,
  whatIf,
  exclude,
  scoped,
  currency,
  onPutBack,
}: {
  actual: Totals | undefined;
  whatIf: Journal | undefined;
  exclude: readonly string[];
  scoped: boolean;
  currency: string;
  onPutBack: (item: string) => void;
}) {
  const words = exclude.map(exclusionLabel).join(', ');
  return (
    <div class="card jr-whatif" role="group" aria-labelledby="whatif-title">
      <h3 id="whatif-title">What if: without {words}</h3>
      <ul class="jr-chips" aria-label="Left out">
        {exclude.map((e) => (
          <li key={e}>
            {exclusionLabel(e)}{' '}
            <button type="button" class="ghost small" onClick={() => onPutBack(e)}>
              Put back<span class="sr-only"> {exclusionLabel(e)}</span>
            </button>
          </li>
        ))}
      </ul>
      <table class="table compact jr-compare">
        <caption class="sr-only">Actual figures beside the what-if</caption>
        <TableHead columns={['Figure', { label: 'Actual', num: true }, { label: `Without ${words}`, num: true }]} />
        <tbody>
          {COMPARED.map((row) => (
            <tr key={row.key} data-testid={`whatif-${row.key}`}>
              <th scope="row">{row.label}</th>
              <td class="num">
                <Figure totals={actual} row={row} currency={currency} />
              </td>
              <td class="num">
                <Figure totals={whatIf?.totals} row={row} currency={currency} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!scoped && whatIf?.excluded && (
        <p class="hint">
          Left out: {whatIf.excluded.roundTrips} round trip{whatIf.excluded.roundTrips === 1 ? '' : 's'} netting{' '}
          <Money value={whatIf.excluded.netPnl} currency={currency} signed />.
        </p>
      )}
    </div>
  );
}
