import type { Part } from '../reply.ts';
import { fmtDateTime, fmtNumber, TableHead } from '../ui.tsx';
import { PriceChart, type Bar } from './PriceChart.tsx';
import { JournalReportToolResult, RoundTripsToolResult } from './journal/AnalysisToolCards.tsx';
import { JournalToolResult, PositionSizeToolResult, TradesToolResult } from './journal/JournalToolCards.tsx';

type Call = Extract<Part, { type: 'tool_call' }>;
type Result = Extract<Part, { type: 'tool_result' }>;

const TITLES: Record<string, string> = {
  get_quote: 'Quote',
  get_price_history: 'Price history',
  get_market_status: 'Market status',
  search_symbols: 'Symbol search',
  list_my_accounts: 'Your accounts',
  get_journal: 'Journal',
  list_trades: 'Trades',
  position_size: 'Position size',
  get_round_trips: 'Round trips',
  get_journal_report: 'Journal report',
};

/** A tool's name as its card's title says it. */
export const toolTitle = (name: string): string => TITLES[name] ?? name;

const str = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');

const SESSIONS: Record<string, string> = { open: 'Market open', 'pre-market': 'Pre-market', 'after-hours': 'After hours', closed: 'Market closed' };

/**
 * An instant on the exchange's clock, named ("Nov 26, 10:31 AM New York time"): a trader reads a quote
 * against the session's hours, not against where they happen to be. Without the exchange's zone, the
 * browser's.
 */
function exchangeTime(iso: string, zone: string): string {
  if (!iso) return '—';
  const at = new Date(iso);
  if (!zone) return fmtDateTime(iso);
  try {
    const date = new Intl.DateTimeFormat(undefined, { timeZone: zone, month: 'short', day: 'numeric' }).format(at);
    const time = new Intl.DateTimeFormat(undefined, { timeZone: zone, hour: 'numeric', minute: '2-digit' }).format(at);
    return `${date}, ${time} ${zone.split('/').at(-1)?.replace(/_/g, ' ') ?? zone} time`;
  } catch {
    return fmtDateTime(iso);
  }
}
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);

/**
 * A tool call of the advisor, with its result once it has run (DESIGN §11). Its `id` is where the reply's
 * figures taken from it link to (DESIGN §18); following such a link brings the focus here.
 */
export function ToolCard({ id, call, result, running }: { id: string; call: Call; result: Result | undefined; running: boolean }) {
  const title = toolTitle(call.name);
  const subject = str(call.arguments.symbol) || str(call.arguments.query);
  return (
    <article id={id} tabIndex={-1} class={`tool ${call.name}`} aria-label={`${title}${subject ? ` ${subject}` : ''}`} data-tool={call.name}>
      <header>
        <strong>{title}</strong>
        {subject && <span class="subject">{subject}</span>}
        {!result && <span class="hint">{running ? 'looking it up…' : 'not run'}</span>}
      </header>
      {result && !result.ok && (
        <p class="tool-error">
          <code>{result.error.code}</code> {result.error.message}
        </p>
      )}
      {result?.ok && <ToolResult name={call.name} result={result.result} />}
    </article>
  );
}

function ToolResult({ name, result }: { name: string; result: Record<string, unknown> }) {
  switch (name) {
    case 'get_quote': {
      const change = num(result.change);
      const pct = num(result.changePercent);
      const dir = change === null ? '' : change >= 0 ? 'up' : 'down';
      const currency = str(result.currency);
      const state = str(result.marketState);
      return (
        <div class="quote">
          <div class="price">
            <span class="last">{fmtNumber(num(result.price), 2)}</span>
            {currency && <span class="currency">{currency}</span>}
            {change !== null && (
              <span class={`change ${dir}`}>
                {change >= 0 ? '▲ +' : '▼ '}
                {fmtNumber(change, 2)} ({pct === null ? '—' : `${pct >= 0 ? '+' : ''}${fmtNumber(pct, 2)}%`})
              </span>
            )}
            {state && <span class={`badge session ${state}`}>{SESSIONS[state] ?? state}</span>}
          </div>
          <dl>
            {(
              [
                ['Open', fmtNumber(num(result.open), 2)],
                ['High', fmtNumber(num(result.high), 2)],
                ['Low', fmtNumber(num(result.low), 2)],
                ['Prev. close', fmtNumber(num(result.previousClose), 2)],
                ['Volume', fmtNumber(num(result.volume))],
              ] as const
            ).map(([term, value]) => (
              <div key={term}>
                <dt>{term}</dt>
                <dd>{value}</dd>
              </div>
            ))}
          </dl>
          <p class="hint">As of {exchangeTime(str(result.asOf), str(result.exchangeTimezone))}</p>
        </div>
      );
    }
    case 'get_price_history': {
      const bars = Array.isArray(result.bars) ? (result.bars as Bar[]) : [];
      return (
        <>
          <PriceChart symbol={str(result.symbol)} interval={str(result.interval)} bars={bars} />
          {result.truncated === true && <p class="hint">The most recent {bars.length} bars of a longer range.</p>}
        </>
      );
    }
    case 'list_my_accounts': {
      const accounts = Array.isArray(result.accounts) ? (result.accounts as Record<string, unknown>[]) : [];
      if (accounts.length === 0) return <p>No accounts yet.</p>;
      return (
        <table class="table compact">
          <TableHead columns={['Name', 'Currency', 'Time zone', 'Brokerage', 'Starting balance']} />
          <tbody>
            {accounts.map((a, i) => (
              <tr key={i}>
                <td>{str(a.name)}</td>
                <td>{str(a.currency)}</td>
                <td>{str(a.timezone)}</td>
                <td>{str(a.brokerage) || '—'}</td>
                <td>{str(a.startingBalance)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      );
    }
    case 'search_symbols': {
      const matches = Array.isArray(result.matches) ? (result.matches as Record<string, unknown>[]) : [];
      return (
        <ul class="matches">
          {matches.map((m, i) => (
            <li key={i}>
              <strong>{str(m.symbol)}</strong> {str(m.name)} <span class="hint">{[str(m.exchange), str(m.type)].filter(Boolean).join(' · ')}</span>
            </li>
          ))}
        </ul>
      );
    }
    case 'get_journal':
      return <JournalToolResult result={result} />;
    case 'list_trades':
      return <TradesToolResult result={result} />;
    case 'position_size':
      return <PositionSizeToolResult result={result} />;
    case 'get_round_trips':
      return <RoundTripsToolResult result={result} />;
    case 'get_journal_report':
      return <JournalReportToolResult result={result} />;
    case 'get_market_status':
      return (
        <p>
          Market <strong>{str(result.market)}</strong> <span class="hint">as of {fmtDateTime(str(result.asOf))}</span>
        </p>
      );
    default:
      return <pre class="raw">{JSON.stringify(result, null, 2)}</pre>;
  }
}
