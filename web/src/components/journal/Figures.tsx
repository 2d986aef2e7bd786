// The journal's figures as elements: an amount in the account's currency, the totals as cards (the
// Journal page) or as a compact table (the advisor's get_journal card), open positions.
import type { ComponentChildren } from 'preact';
import type { Schemas } from '../../api/client.ts';
import { TableHead } from '../../ui.tsx';
import { dateTimeIn, decimal, isDecimal, money, percent, signOf } from './format.ts';
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
    { key: 'winRate', label: 'Win rate', value: percent(t.winRate), sub: t.winRate === null ? 'no closed round trip' : undefined },
    {
      key: 'profitFactor',
      label: 'Profit factor',
      value: t.profitFactor === null ? '—' : decimal(t.profitFactor),
      sub: t.profitFactor === null ? (t.wins > 0 ? 'no losing round trip' : 'no round trip') : 'gross win ÷ gross loss',
    },
    { key: 'expectancy', label: 'Expectancy', value: m(t.expectancy, true), sub: 'net per round trip' },
    { key: 'averageWin', label: 'Average win', value: m(t.averageWin) },
    { key: 'averageLoss', label: 'Average loss', value: m(t.averageLoss) },
    { key: 'largestWin', label: 'Largest win', value: m(t.largestWin) },
    { key: 'largestLoss', label: 'Largest loss', value: m(t.largestLoss) },
    { key: 'maxDrawdown', label: 'Max drawdown', value: m(t.maxDrawdown), sub: 'peak to trough of cumulative net' },
  ];
  if (balance !== undefined) list.push({ key: 'balance', label: 'Balance', value: m(balance), sub: 'starting balance + all-time net' });
  return list;
}

/** The Journal page's totals: one card per figure. */
export function TotalsCards({ totals, currency, balance }: { totals: Totals; currency: string; balance: string }) {
  return (
    <dl class="jr-totals">
      {figures(totals, currency, balance).map((f) => (
        <div key={f.key} class={f.main ? 'jr-total main' : 'jr-total'} data-testid={`total-${f.key}`}>
          <dt>{f.label}</dt>
          <dd>{f.value}</dd>
          {f.sub && <dd class="sub">{f.sub}</dd>}
        </div>
      ))}
    </dl>
  );
}

/** The same figures as a compact two-column table (the chat card). */
export function TotalsTable({ totals, currency, balance, caption }: { totals: Totals; currency: string; balance?: string; caption: string }) {
  const skip = new Set(['averageWin', 'averageLoss', 'largestWin', 'largestLoss']);
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
                  <Money value={p.averagePrice} currency={currency} />
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
