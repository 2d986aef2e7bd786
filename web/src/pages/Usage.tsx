import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { Page, Problem, fmtNumber, fmtUsd, useLoad, TableHead } from '../ui.tsx';

type Row = Schemas['UsageRow'];
const DAY = 86_400_000;
const day = (d: Date) => d.toISOString().slice(0, 10);
const RANGES = [7, 30, 90] as const;

/** Tokens and estimated cost per day (DESIGN §13), as a chart, with the figures by model in a table. */
export function UsagePage() {
  const [to, setTo] = useState(day(new Date()));
  const [from, setFrom] = useState(day(new Date(Date.now() - 29 * DAY)));
  const byDay = useLoad(() => must(api.GET('/api/advisor/usage', { params: { query: { from, to, groupBy: 'day' } } })), [from, to]);
  const byModel = useLoad(() => must(api.GET('/api/advisor/usage', { params: { query: { from, to, groupBy: 'model' } } })), [from, to]);
  const total = byDay.data?.total;
  const today = day(new Date());
  const range = (days: number) => {
    setTo(today);
    setFrom(day(new Date(Date.now() - (days - 1) * DAY)));
  };
  const current = to === today ? RANGES.find((n) => from === day(new Date(Date.now() - (n - 1) * DAY))) : undefined;
  return (
    <Page title="Usage">
      <div class="period">
        <div class="ranges" role="group" aria-label="Period">
          {RANGES.map((n) => (
            <button key={n} type="button" class={current === n ? '' : 'secondary'} aria-pressed={current === n} onClick={() => range(n)}>
              {n} days
            </button>
          ))}
        </div>
        <form class="row" onSubmit={(e) => e.preventDefault()} aria-label="From and to">
          <label>
            From
            <input type="date" value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />
          </label>
          <label>
            To
            <input type="date" value={to} min={from} onChange={(e) => setTo(e.currentTarget.value)} />
          </label>
        </form>
      </div>
      <Problem error={byDay.error ?? byModel.error} />
      {total && (
        <div class="stats">
          <div class="stat">
            <span class="label">Turns</span>
            <span class="value">{fmtNumber(total.turns)}</span>
          </div>
          <div class="stat">
            <span class="label">Tokens in / out</span>
            <span class="value">
              {fmtNumber(total.inputTokens)} / {fmtNumber(total.outputTokens)}
            </span>
          </div>
          <div class="stat">
            <span class="label">Estimated cost on your keys</span>
            <span class="value">{fmtUsd(total.estimatedCostUsd)}</span>
          </div>
        </div>
      )}
      {byDay.data && <DayChart rows={byDay.data.rows} from={from} to={to} />}
      {byModel.data && byModel.data.rows.length > 0 && (
        <div class="table-wrap">
          <table class="table">
            <caption>By model</caption>
            <TableHead
              columns={[
                'Model',
                { label: 'Turns', num: true },
                { label: 'Tokens in', num: true, wide: true },
                { label: 'Tokens out', num: true, wide: true },
                { label: 'Est. cost', num: true },
                { label: 'Credits', num: true },
              ]}
            />
            <tbody>
              {byModel.data.rows.map((r) => (
                <tr key={`${r.provider ?? ''}/${r.key}`}>
                  <th scope="row">{r.key}</th>
                  <td class="num">{fmtNumber(r.turns)}</td>
                  <td class="num wide-only">{fmtNumber(r.inputTokens)}</td>
                  <td class="num wide-only">{fmtNumber(r.outputTokens)}</td>
                  <td class="num">{r.unpricedTurns > 0 && r.estimatedCostUsd === null ? 'unpriced' : fmtUsd(r.estimatedCostUsd)}</td>
                  <td class="num">{fmtNumber(r.creditsCharged)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Page>
  );
}

/** Round steps for an axis up to `max`: 0 and about `count` more (1, 2 or 5 times a power of ten). */
function ticks(max: number, count: number): number[] {
  if (max <= 0) return [0];
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? raw;
  return Array.from({ length: Math.ceil(max / step) + 1 }, (_, i) => i * step);
}

const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });
/** Dollars on an axis: two significant digits, however small ("$0.00002"). */
const axisUsd = new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', maximumSignificantDigits: 2 });
const shortDate = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

/**
 * Tokens per day as bars on a token axis (left), the estimated cost of each day with use as a point on
 * a dollar axis (right) — points, not a line, so a lone day of use is not drawn as a ramp from zero —
 * and dates along the bottom.
 */
function DayChart({ rows, from, to }: { rows: Row[]; from: string; to: string }) {
  // Drawn at the width it is shown at, so its text keeps its size on a phone.
  const figure = useRef<HTMLElement>(null);
  const [width, setWidth] = useState(760);
  useLayoutEffect(() => {
    const el = figure.current;
    if (!el) return;
    const observer = new ResizeObserver(([entry]) => entry && setWidth(Math.max(300, Math.round(entry.contentRect.width))));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  const byKey = new Map(rows.map((r) => [r.key, r]));
  const days: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`) && days.length < 400; t += DAY) days.push(day(new Date(t)));
  const tokens = days.map((d) => (byKey.get(d)?.inputTokens ?? 0) + (byKey.get(d)?.outputTokens ?? 0));
  const costs = days.map((d) => byKey.get(d)?.estimatedCostUsd ?? 0);
  const tokenTicks = ticks(Math.max(...tokens), 4);
  const costTicks = ticks(Math.max(...costs), 3);
  const tokenMax = tokenTicks.at(-1) || 1;
  const costMax = costTicks.at(-1) || 1;
  const [w, h, left, right, top, bottom] = [width, 240, 52, 66, 10, 26];
  const plotW = w - left - right;
  const plotH = h - top - bottom;
  const bw = plotW / Math.max(days.length, 1);
  const y = (v: number, max: number) => top + plotH - (v / max) * plotH;
  // A date every 80 pixels or so.
  const labelEvery = Math.max(1, Math.ceil(days.length / Math.max(2, Math.floor(plotW / 80))));
  const active = days.filter((_, i) => (tokens[i] ?? 0) > 0).length;
  return (
    <figure class="usage-chart" ref={figure}>
      <svg
        viewBox={`0 0 ${w} ${h}`}
        role="img"
        aria-label={`Tokens per day from ${from} to ${to}: ${active} days with use; bars are tokens, points the estimated cost of a day.`}
      >
        <g class="y-axis">
          {tokenTicks.map((t) => (
            <g key={t}>
              <line class="grid" x1={left} x2={w - right} y1={y(t, tokenMax)} y2={y(t, tokenMax)} />
              <text x={left - 6} y={y(t, tokenMax) + 4} text-anchor="end">
                {compact.format(t)}
              </text>
            </g>
          ))}
        </g>
        {days.map((d, i) => {
          const bh = ((tokens[i] ?? 0) / tokenMax) * plotH;
          return (
            <rect key={d} class="bar" x={left + i * bw + bw * 0.1} y={top + plotH - bh} width={Math.max(bw * 0.8, 1)} height={bh}>
              <title>
                {d}: {fmtNumber(tokens[i] ?? 0)} tokens, {fmtUsd(costs[i] ?? 0)}
              </title>
            </rect>
          );
        })}
        {days.map((d, i) =>
          (costs[i] ?? 0) > 0 ? (
            <circle key={d} class="cost-point" cx={left + (i + 0.5) * bw} cy={y(costs[i] ?? 0, costMax)} r={4}>
              <title>
                {d}: {fmtUsd(costs[i] ?? 0)}
              </title>
            </circle>
          ) : null,
        )}
        <g class="cost-axis">
          {costTicks.map((t) => (
            <text key={t} x={w - right + 6} y={y(t, costMax) + 4}>
              {axisUsd.format(t)}
            </text>
          ))}
        </g>
        <g class="x-axis">
          {days.map((d, i) =>
            i % labelEvery === 0 ? (
              <text key={d} x={left + (i + 0.5) * bw} y={h - 6} text-anchor="middle">
                {shortDate.format(new Date(`${d}T00:00:00Z`))}
              </text>
            ) : null,
          )}
        </g>
      </svg>
      <figcaption>
        <span class="legend bar" /> tokens (in + out, left axis) <span class="legend cost" /> estimated cost of a day on your keys (USD, right axis)
      </figcaption>
    </figure>
  );
}
