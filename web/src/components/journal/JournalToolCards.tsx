// The advisor's journal tools as chat cards (DESIGN §14): get_journal as a compact totals table with the
// daily chart, list_trades as a table of the fills it read, position_size as its five figures. A result of
// another shape falls back to its JSON.
import { TableHead } from '../../ui.tsx';
import { DailyPnlChart } from './DailyPnlChart.tsx';
import { TRADE_CELL_COLUMNS, TradeCells } from './TradesTable.tsx';
import { Money, SymbolCell, TotalsTable, type JournalDay, type OpenPosition, type Totals } from './Figures.tsx';
import { day, decimal, isDecimal, signOf } from './format.ts';
import './journal.css';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown): string => (typeof v === 'string' ? v : '');

interface ToolAccount {
  name: string;
  id: string;
  currency: string;
}

interface JournalResult {
  account: ToolAccount;
  from: string;
  to: string;
  totals: Totals;
  days: JournalDay[];
  daysOmitted?: number;
  openPositions: OpenPosition[];
  balance: string;
}

function readAccount(v: unknown): ToolAccount | undefined {
  return isObject(v) && typeof v.name === 'string' && typeof v.currency === 'string' ? { name: v.name, id: text(v.id), currency: v.currency } : undefined;
}

function readJournal(r: Record<string, unknown>): JournalResult | undefined {
  const account = readAccount(r.account);
  if (!account || !isObject(r.totals) || !Array.isArray(r.days) || typeof r.from !== 'string' || typeof r.to !== 'string') return undefined;
  const days = r.days.filter((d): d is JournalDay => isObject(d) && typeof d.tradingDay === 'string' && isDecimal(d.netPnl));
  return {
    account,
    from: r.from,
    to: r.to,
    totals: r.totals as unknown as Totals,
    days,
    daysOmitted: typeof r.daysOmitted === 'number' ? r.daysOmitted : undefined,
    openPositions: Array.isArray(r.openPositions)
      ? (r.openPositions.filter((p) => isObject(p) && typeof p.symbol === 'string' && isDecimal(p.quantity)) as OpenPosition[])
      : [],
    balance: text(r.balance),
  };
}

const Raw = ({ result }: { result: unknown }) => <pre class="raw">{JSON.stringify(result, null, 2)}</pre>;

/** get_journal: the account and range, the totals, the daily chart, the open positions in a line. */
export function JournalToolResult({ result }: { result: Record<string, unknown> }) {
  const j = readJournal(result);
  if (!j) return <Raw result={result} />;
  const { currency } = j.account;
  return (
    <div class="jr-tool">
      <p class="hint">
        <a href={`/accounts/${encodeURIComponent(j.account.id)}/journal`}>{j.account.name}</a> · {day(j.from)} – {day(j.to)} · {currency}
      </p>
      <TotalsTable totals={j.totals} currency={currency} balance={isDecimal(j.balance) ? j.balance : undefined} caption={`Totals of ${j.account.name}`} />
      <DailyPnlChart days={j.days} currency={currency} from={j.from} to={j.to} height={170} figuresTable={false} />
      {j.daysOmitted !== undefined && j.daysOmitted > 0 && (
        <p class="hint">
          The {j.days.length} most recent trading days; {j.daysOmitted} earlier {j.daysOmitted === 1 ? 'day is' : 'days are'} in the totals but not drawn.
        </p>
      )}
      <p class="hint">
        {j.openPositions.length === 0
          ? 'No open positions.'
          : `Open: ${j.openPositions.map((p) => `${p.symbol} ${signOf(p.quantity) < 0 ? 'short' : 'long'} ${decimal(p.quantity.replace('-', ''))} @ ${decimal(p.averagePrice)}`).join(', ')}`}
      </p>
    </div>
  );
}

interface ToolTrade {
  symbol: string;
  side: 'buy' | 'sell';
  quantity: string;
  price: string;
  fee: string;
  tradingDay: string;
  note: string | null;
  tags: string[];
  assetClass?: string;
  multiplier?: string;
}

function readTrade(v: unknown): ToolTrade | undefined {
  if (!isObject(v) || typeof v.symbol !== 'string' || (v.side !== 'buy' && v.side !== 'sell') || typeof v.tradingDay !== 'string') return undefined;
  if (!isDecimal(v.quantity) || !isDecimal(v.price) || !isDecimal(v.fee)) return undefined;
  const tags = Array.isArray(v.tags) ? v.tags.filter((t): t is string => typeof t === 'string') : [];
  return {
    symbol: v.symbol,
    side: v.side,
    quantity: v.quantity,
    price: v.price,
    fee: v.fee,
    tradingDay: v.tradingDay,
    note: typeof v.note === 'string' ? v.note : null,
    tags,
    ...(typeof v.assetClass === 'string' ? { assetClass: v.assetClass } : {}),
    ...(isDecimal(v.multiplier) ? { multiplier: v.multiplier } : {}),
  };
}

const TRADE_COLUMNS = ['Trading day', 'Symbol', ...TRADE_CELL_COLUMNS];

/**
 * list_trades: the fills the advisor read, newest first, as the Journal page's table shows them (without its
 * actions: a card records what the model saw); when the range held more, a link to the account's journal.
 */
export function TradesToolResult({ result }: { result: Record<string, unknown> }) {
  const account = readAccount(result.account);
  const trades = Array.isArray(result.trades) ? result.trades.map(readTrade) : undefined;
  if (!account || !trades || trades.some((t) => t === undefined)) return <Raw result={result} />;
  const rows = trades as ToolTrade[];
  const journal = `/accounts/${encodeURIComponent(account.id)}/journal`;
  return (
    <div class="jr-tool">
      <p class="hint">
        <a href={journal}>{account.name}</a> ·{' '}
        {rows.length === 0 ? 'no trades in this range' : `${rows.length} ${rows.length === 1 ? 'trade' : 'trades'}, newest first`} · {account.currency}
      </p>
      {rows.length > 0 && (
        <div class="jr-scroll" role="region" aria-label={`Trades of ${account.name} the advisor read`} tabIndex={0}>
          <table class="table compact jr-trades">
            <TableHead columns={TRADE_COLUMNS} />
            <tbody>
              {rows.map((t, i) => (
                <tr key={i}>
                  <td>{day(t.tradingDay)}</td>
                  <SymbolCell symbol={t.symbol} assetClass={t.assetClass} multiplier={t.multiplier} />
                  <TradeCells trade={t} currency={account.currency} />
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {result.more === true && (
        <p class="hint">
          The range holds more trades than the advisor asked for: <a href={journal}>all of them in the journal</a>.
        </p>
      )}
    </div>
  );
}

const SIZE_FIELDS = [
  { key: 'shares', label: 'Shares', money: false },
  { key: 'riskAmount', label: 'Risk amount', money: true },
  { key: 'perShareRisk', label: 'Risk per share', money: true },
  { key: 'positionValue', label: 'Position value', money: true },
  { key: 'balance', label: 'Balance', money: true },
] as const;

/** position_size: how many shares, and the figures behind them, in the account's currency when it has one. */
export function PositionSizeToolResult({ result }: { result: Record<string, unknown> }) {
  if (!SIZE_FIELDS.every((f) => isDecimal(result[f.key]))) return <Raw result={result} />;
  const account = readAccount(result.account);
  return (
    <div class="jr-tool">
      <dl class="jr-size">
        {SIZE_FIELDS.map((f) => (
          <div key={f.key} class={f.key === 'shares' ? 'main' : undefined} data-testid={`size-${f.key}`}>
            <dt>{f.label}</dt>
            <dd>{f.money ? <Money value={result[f.key] as string} currency={account?.currency} /> : decimal(result[f.key] as string)}</dd>
          </div>
        ))}
      </dl>
      <p class="hint">
        {account ? `Sized on the balance of ${account.name}.` : 'Sized on the balance given.'} Shares are rounded down so the risk stays within the amount.
      </p>
    </div>
  );
}
