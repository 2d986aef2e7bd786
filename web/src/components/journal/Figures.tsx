// The journal's figures as elements: an amount in the account's currency, the totals as cards (the
// Journal page) or as a compact table (the advisor's get_journal card), open positions.
import type { ComponentChildren } from 'preact';
import type { Schemas } from '../../api/client.ts';
import { TableHead } from '../../ui.tsx';
import { dateTimeIn, decimal, instrument, isDecimal, money, percent, price, rMultiple, signOf } from './format.ts';
import './journal.css';

export type Totals = Schemas['Journal']['totals'];
export type JournalDay = Schemas['JournalDay'];
export type OpenPosition = Schemas['Journal']['openPositions'][number];

/**
 * An amount as the service wrote it, shown in the currency (no currency: as a plain decimal). When the
 * figure has more fractional digits than the currency shows, the shown text is marked "≈" and the exact
 * figure is the element's value and title. `tone` colours a gain / a loss (the sign is written too).
 */
export function Money({ value, currency, signed, tone }: { value: string | null | undefined; currency: string | undefined; signed?: boolean; tone?: boolean }) {
  if (!isDecimal(value)) return <span>—</span>;
  if (!currency) return <data value={value}>{decimal(value)}</data>;
  const m = money(value, currency, { signed });
  const cls = tone ? (m.sign > 0 ? 'up' : m.sign < 0 ? 'down' : undefined) : undefined;
  return (
    <data value={m.exact} class={cls} title={m.isExact ? undefined : `Exactly ${m.exact}`}>
      {m.isExact ? '' : '≈ '}
      {m.text}
    </data>
  );
}

/** A price as the instrument quotes it: every digit the service wrote, grouped, in the currency — never rounded. */
export function Price({ value, currency }: { value: string | null | undefined; currency: string }) {
  if (!isDecimal(value)) return <span>—</span>;
  return <data value={value}>{price(value, currency)}</data>;
}

/** A row's symbol, with what it is when not a plain stock ("ES · future ×50"). */
export function SymbolCell({ symbol, assetClass, multiplier }: { symbol: string; assetClass?: string; multiplier?: string }) {
  const what = instrument(assetClass, multiplier);
  return (
    <th scope="row">
      {symbol}
      {what && <span class="jr-instrument"> · {what}</span>}
    </th>
  );
}

interface Figure {
  readonly key: string;
  readonly label: string;
  readonly value: ComponentChildren;
  readonly sub?: string;
  readonly main?: boolean;
}

/** The totals of a range, each with its label, in reading order (the cards and the chat table share it). */
function figures(t: Totals, currency: string, balance: string | undefined): Figure[] {
  const m = (v: string | null, signed = false) => <Money value={v} currency={currency} signed={signed} tone={signed} />;
  const list: Figure[] = [
    { key: 'netPnl', label: 'Net P&L', value: m(t.netPnl, true), sub: 'realized less fees', main: true },
    { key: 'realizedPnl', label: 'Realized P&L', value: m(t.realizedPnl, true) },
    { key: 'fees', label: 'Fees', value: m(t.fees) },
    { key: 'roundTrips', label: 'Round trips', value: String(t.roundTrips), sub: `${t.wins} won · ${t.losses} lost` },
    { key: 'winRate', label: 'Win rate', value: percent(t.winRate), sub: t.winRate === null ? 'no closed round trip' : 'won ÷ (won + lost)' },
    {
      key: 'profitFactor',
      label: 'Profit factor',
      value: t.profitFactor === null ? '—' : decimal(t.profitFactor),
      sub: t.profitFactor === null ? (t.wins > 0 ? 'no losing round trip' : 'no round trip') : 'gross win ÷ gross loss',
    },
    { key: 'expectancy', label: 'Expectancy', value: m(t.expectancy, true), sub: 'net per round trip' },
    { key: 'averageR', label: 'Average R', value: rMultiple(t.averageR ?? null), sub: 'of trips with a stop' },
    { key: 'expectancyR', label: 'Expectancy R', value: rMultiple(t.expectancyR ?? null), sub: 'net ÷ initial risk' },
    { key: 'averageWin', label: 'Average win', value: m(t.averageWin) },
    { key: 'averageLoss', label: 'Average loss', value: m(t.averageLoss) },
    { key: 'largestWin', label: 'Largest win', value: m(t.largestWin) },
    { key: 'largestLoss', label: 'Largest loss', value: m(t.largestLoss) },
    { key: 'maxDrawdown', label: 'Max drawdown', value: m(t.maxDrawdown), sub: 'peak to trough of net' },
  ];
  if (balance !== undefined) list.push({ key: 'balance', label: 'Balance', value: m(balance), sub: 'starting + all-time net' });
  return list;
}

/** Totals not read yet: the same cards, each figure a dash, so nothing moves when they arrive. */
const PENDING: Totals = {
  realizedPnl: '',
  fees: '',
  netPnl: '',
  roundTrips: 0,
  wins: 0,
  losses: 0,
  winRate: '',
  profitFactor: '',
  expectancy: null,
  averageWin: null,
  averageLoss: null,
  largestWin: null,
  largestLoss: null,
  maxDrawdown: '',
  averageR: null,
  expectancyR: null,
};

/** The Journal page's totals: one card per figure. */
export function TotalsCards({ totals, currency, balance }: { totals: Totals | undefined; currency: string; balance: string | undefined }) {
  const list = figures(totals ?? PENDING, currency, totals ? balance : '');
  return (
    <dl class="jr-totals" aria-busy={totals ? undefined : 'true'}>
      {list.map((f) => (
        <div key={f.key} class={f.main ? 'jr-total main' : 'jr-total'} data-testid={`total-${f.key}`}>
          <dt>{f.label}</dt>
          <dd>{totals ? f.value : '—'}</dd>
          {f.sub && <dd class="sub">{totals || f.key !== 'roundTrips' ? f.sub : '\u00a0'}</dd>}
        </div>
      ))}
    </dl>
  );
}

/** The same figures as a compact two-column table (the chat card). */
export function TotalsTable({ totals, currency, balance, caption }: { totals: Totals; currency: string; balance?: string; caption: string }) {
  const skip = new Set(['averageWin', 'averageLoss', 'largestWin', 'largestLoss']);
  // R figures only where the advisor's result had them.
  if ((totals.averageR ?? null) === null) skip.add('averageR');
  if ((totals.expectancyR ?? null) === null) skip.add('expectancyR');
  return (
    <table class="table compact jr-totals-table">
      <caption>{caption}</caption>
      <tbody>
        {figures(totals, currency, balance)
          .filter((f) => !skip.has(f.key))
          .map((f) => (
            <tr key={f.key} data-testid={`total-${f.key}`}>
              <th scope="row">{f.label}</th>
              <td class="num">{f.value}</td>
            </tr>
          ))}
      </tbody>
    </table>
  );
}

/** Open positions (after the range's last fill): long or short, quantity, average price, since when. */
export function OpenPositions({ positions, currency, timezone, caption }: { positions: OpenPosition[]; currency: string; timezone: string; caption: string }) {
  if (positions.length === 0) return <p class="hint">No open positions.</p>;
  return (
    <div class="jr-scroll" role="region" aria-label={caption} tabIndex={0}>
      <table class="table compact">
        <caption class="sr-only">{caption}</caption>
        <TableHead columns={['Symbol', 'Side', { label: 'Quantity', num: true }, { label: 'Average price', num: true }, 'Opened']} />
        <tbody>
          {positions.map((p) => {
            const short = signOf(p.quantity) < 0;
            return (
              <tr key={p.symbol}>
                <th scope="row">{p.symbol}</th>
                <td>{short ? 'Short' : 'Long'}</td>
                <td class="num">{decimal(short ? p.quantity.slice(1) : p.quantity)}</td>
                <td class="num">
                  <Price value={p.averagePrice} currency={currency} />
                </td>
                <td>{dateTimeIn(p.openedAt, timezone)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
