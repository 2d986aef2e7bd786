// The advisor's round-trip tools as chat cards (DESIGN §17): get_round_trips as a small table of the trips
// it read (with R), get_journal_report as its groups beside the totals. A result of another shape falls
// back to its JSON. Figures are the service's, formatted only.
import { TableHead } from '../../ui.tsx';
import { Money, Price, SymbolCell, type Totals } from './Figures.tsx';
import { day, decimal, holdTime, isDecimal, percent, rMultiple } from './format.ts';
import './journal.css';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

interface CardAccount {
  readonly name: string;
  readonly id: string;
  readonly currency: string;
}

function readAccount(v: unknown): CardAccount | undefined {
  if (!isObject(v) || typeof v.name !== 'string' || typeof v.currency !== 'string') return undefined;
  return { name: v.name, id: typeof v.id === 'string' ? v.id : '', currency: v.currency };
}

const Raw = ({ result }: { result: unknown }) => <pre class="raw">{JSON.stringify(result, null, 2)}</pre>;

function AccountLine({ account, children }: { account: CardAccount; children: preact.ComponentChildren }) {
  return (
    <p class="hint">
      <a href={`/accounts/${encodeURIComponent(account.id)}/journal`}>{account.name}</a> · {children} · {account.currency}
    </p>
  );
}

interface CardTrip {
  readonly symbol: string;
  readonly side: 'long' | 'short';
  readonly assetClass?: string;
  readonly multiplier?: string;
  readonly tradingDay: string;
  readonly holdSeconds: number;
  readonly maxQuantity: string;
  readonly entryAverage: string;
  readonly exitAverage: string;
  readonly netPnl: string;
  readonly rMultiple: string | null;
  readonly tags: readonly string[];
}

function readTrip(v: unknown): CardTrip | undefined {
  if (!isObject(v) || typeof v.symbol !== 'string' || (v.side !== 'long' && v.side !== 'short') || typeof v.tradingDay !== 'string') return undefined;
  if (typeof v.holdSeconds !== 'number' || !isDecimal(v.maxQuantity) || !isDecimal(v.entryAverage) || !isDecimal(v.exitAverage) || !isDecimal(v.netPnl))
    return undefined;
  return {
    symbol: v.symbol,
    side: v.side,
    ...(typeof v.assetClass === 'string' ? { assetClass: v.assetClass } : {}),
    ...(isDecimal(v.multiplier) ? { multiplier: v.multiplier } : {}),
    tradingDay: v.tradingDay,
    holdSeconds: v.holdSeconds,
    maxQuantity: v.maxQuantity,
    entryAverage: v.entryAverage,
    exitAverage: v.exitAverage,
    netPnl: v.netPnl,
    rMultiple: isDecimal(v.rMultiple) ? v.rMultiple : null,
    tags: Array.isArray(v.tags) ? v.tags.filter((t): t is string => typeof t === 'string') : [],
  };
}

// What matters first (a phone shows the first few and scrolls the rest in the card's box).
const TRIP_COLUMNS = [
  'Symbol',
  'Side',
  { label: 'Net P&L', num: true },
  { label: 'R', num: true },
  { label: 'Entry → exit', num: true },
  { label: 'Quantity', num: true },
  'Hold',
  'Closed',
  'Tags',
];

/** get_round_trips: the trips the advisor read, newest close first; a link to the journal when there were more. */
export function RoundTripsToolResult({ result }: { result: Record<string, unknown> }) {
  const account = readAccount(result.account);
  const trips = Array.isArray(result.roundTrips) ? result.roundTrips.map(readTrip) : undefined;
  if (!account || !trips || trips.some((t) => t === undefined)) return <Raw result={result} />;
  const rows = trips as CardTrip[];
  return (
    <div class="jr-tool">
      <AccountLine account={account}>
        {rows.length === 0 ? 'no round trip closed in this range' : `${rows.length} round ${rows.length === 1 ? 'trip' : 'trips'}, newest close first`}
      </AccountLine>
      {rows.length > 0 && (
        <div class="jr-scroll" role="region" aria-label={`Round trips of ${account.name} the advisor read`} tabIndex={0}>
          <table class="table compact">
            <TableHead columns={TRIP_COLUMNS} />
            <tbody>
              {rows.map((t, i) => (
                <tr key={i}>
                  <SymbolCell symbol={t.symbol} assetClass={t.assetClass} multiplier={t.multiplier} />
                  <td>{t.side === 'long' ? 'Long' : 'Short'}</td>
                  <td class="num">
                    <Money value={t.netPnl} currency={account.currency} signed tone />
                  </td>
                  <td class="num">{rMultiple(t.rMultiple)}</td>
                  <td class="num">
                    <Price value={t.entryAverage} currency={account.currency} /> → <Price value={t.exitAverage} currency={account.currency} />
                  </td>
                  <td class="num">{decimal(t.maxQuantity)}</td>
                  <td>{holdTime(t.holdSeconds)}</td>
                  <td>{day(t.tradingDay)}</td>
                  <td>{t.tags.join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {result.more === true && (
        <p class="hint">
          The range holds more round trips than the advisor asked for:{' '}
          <a href={`/accounts/${encodeURIComponent(account.id)}/journal`}>all of them in the journal</a>.
        </p>
      )}
    </div>
  );
}

const WEEKDAYS: Record<string, string> = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' };
const BY_WORDS: Record<string, string> = { symbol: 'symbol', tag: 'tag', side: 'side', weekday: 'weekday', hour: 'hour of the opening', holdTime: 'hold time' };

/** A report group's key in words: "Friday", "15:00–16:00", "Long", "Untagged". */
function groupLabel(by: string, key: string | null): string {
  if (key === null) return by === 'tag' ? 'Untagged' : '—';
  if (by === 'weekday') return WEEKDAYS[key] ?? key;
  if (by === 'side') return key === 'long' ? 'Long' : key === 'short' ? 'Short' : key;
  if (by === 'hour' && /^\d{2}$/.test(key)) return `${key}:00–${String((Number(key) + 1) % 24).padStart(2, '0')}:00`;
  return key;
}

interface ReportGroup {
  readonly key: string | null;
  readonly totals: Totals;
}

const isTotals = (v: unknown): v is Totals => isObject(v) && isDecimal(v.netPnl) && typeof v.roundTrips === 'number';

/** One row of the report's table: a group, or the totals (a row header of its own). */
function GroupRow({ label, totals: t, currency, total }: { label: string; totals: Totals; currency: string; total?: boolean }) {
  return (
    <tr class={total ? 'jr-total-row' : undefined}>
      <th scope="row">{label}</th>
      <td class="num">
        <Money value={t.netPnl} currency={currency} signed tone />
      </td>
      <td class="num">{t.roundTrips}</td>
      <td class="num">{percent(t.winRate)}</td>
      <td class="num">
        <Money value={t.expectancy} currency={currency} signed />
      </td>
      <td class="num">{rMultiple(t.averageR)}</td>
    </tr>
  );
}

/** get_journal_report: each group's net P&L, round trips, win rate, expectancy and average R, then the totals. */
export function JournalReportToolResult({ result }: { result: Record<string, unknown> }) {
  const account = readAccount(result.account);
  const by = typeof result.by === 'string' ? result.by : undefined;
  const groups = Array.isArray(result.groups) ? result.groups : undefined;
  const valid = groups?.every((g) => isObject(g) && (typeof g.key === 'string' || g.key === null) && isTotals(g.totals));
  if (!account || !by || !groups || !valid || !isTotals(result.totals) || typeof result.from !== 'string' || typeof result.to !== 'string')
    return <Raw result={result} />;
  const exclude = Array.isArray(result.exclude) ? result.exclude.filter((e): e is string => typeof e === 'string') : [];
  const currency = account.currency;
  return (
    <div class="jr-tool">
      <AccountLine account={account}>
        {day(result.from)} – {day(result.to)} · by {BY_WORDS[by] ?? by}
      </AccountLine>
      {exclude.length > 0 && <p class="hint">What if: without {exclude.join(', ')}.</p>}
      <div class="jr-scroll" role="region" aria-label={`Report of ${account.name} by ${BY_WORDS[by] ?? by}`} tabIndex={0}>
        <table class="table compact">
          <TableHead
            columns={[
              by === 'symbol' ? 'Symbol' : 'Group',
              { label: 'Net P&L', num: true },
              { label: 'Round trips', num: true },
              { label: 'Win rate', num: true },
              { label: 'Expectancy', num: true },
              { label: 'Average R', num: true },
            ]}
          />
          <tbody>
            {(groups as ReportGroup[]).map((g) => (
              <GroupRow key={g.key ?? ''} label={groupLabel(by, g.key)} totals={g.totals} currency={currency} />
            ))}
            <GroupRow label={exclude.length > 0 ? 'All (what-if)' : 'All'} totals={result.totals} currency={currency} total />
          </tbody>
        </table>
      </div>
      {groups.length === 0 && <p class="hint">No round trip closed in this range.</p>}
    </div>
  );
}
