import { useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { Page, Problem, fmtNumber, fmtUsd, useLoad, TableHead } from '../ui.tsx';

type Row = Schemas['UsageRow'];
const day = (d: Date) => d.toISOString().slice(0, 10);

/** Tokens and estimated cost per day (DESIGN §13), as bars, with the figures in a table beside them. */
export function UsagePage() {
  const [to, setTo] = useState(day(new Date()));
  const [from, setFrom] = useState(day(new Date(Date.now() - 29 * 86_400_000)));
  const byDay = useLoad(() => must(api.GET('/api/advisor/usage', { params: { query: { from, to, groupBy: 'day' } } })), [from, to]);
  const byModel = useLoad(() => must(api.GET('/api/advisor/usage', { params: { query: { from, to, groupBy: 'model' } } })), [from, to]);
  const total = byDay.data?.total;
  return (
    <Page title="Usage">
      <form class="row" onSubmit={(e) => e.preventDefault()} aria-label="Period">
        <label>
          From
          <input type="date" value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />
        </label>
        <label>
          To
          <input type="date" value={to} min={from} onChange={(e) => setTo(e.currentTarget.value)} />
        </label>
      </form>
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
        <table class="table">
          <caption>By model</caption>
          <TableHead columns={['Model', { label: 'Turns', num: true }, { label: 'Tokens in', num: true }, { label: 'Tokens out', num: true }, { label: 'Est. cost', num: true }, { label: 'Credits', num: true }]} />
          <tbody>
            {byModel.data.rows.map((r) => (
              <tr key={`${r.provider ?? ''}/${r.key}`}>
                <th scope="row">{r.key}</th>
                <td class="num">{fmtNumber(r.turns)}</td>
                <td class="num">{fmtNumber(r.inputTokens)}</td>
                <td class="num">{fmtNumber(r.outputTokens)}</td>
                <td class="num">{r.unpricedTurns > 0 && r.estimatedCostUsd === null ? 'unpriced' : fmtUsd(r.estimatedCostUsd)}</td>
                <td class="num">{fmtNumber(r.creditsCharged)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}

function DayChart({ rows, from, to }: { rows: Row[]; from: string; to: string }) {
  const byKey = new Map(rows.map((r) => [r.key, r]));
  const days: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`) && days.length < 400; t += 86_400_000) days.push(day(new Date(t)));
  const tokens = days.map((d) => (byKey.get(d)?.inputTokens ?? 0) + (byKey.get(d)?.outputTokens ?? 0));
  const costs = days.map((d) => byKey.get(d)?.estimatedCostUsd ?? 0);
  const maxTokens = Math.max(1, ...tokens);
  const maxCost = Math.max(...costs);
  const w = 720;
  const h = 200;
  const bw = w / Math.max(days.length, 1);
  const line = costs.map((c, i) => `${(i + 0.5) * bw},${maxCost > 0 ? h - (c / maxCost) * (h - 10) : h}`).join(' ');
  const active = days.filter((_, i) => (tokens[i] ?? 0) > 0).length;
  return (
    <figure class="usage-chart">
      <svg viewBox={`0 0 ${w} ${h + 20}`} role="img" aria-label={`Tokens per day from ${from} to ${to}: ${active} days with use; bars are tokens, the line is estimated cost.`}>
        {days.map((d, i) => {
          const t = tokens[i] ?? 0;
          const bh = (t / maxTokens) * (h - 10);
          return (
            <rect key={d} class="bar" x={i * bw + 1} y={h - bh} width={Math.max(bw - 2, 1)} height={bh}>
              <title>
                {d}: {fmtNumber(t)} tokens, {fmtUsd(costs[i] ?? 0)}
              </title>
            </rect>
          );
        })}
        {maxCost > 0 && <polyline class="cost" points={line} fill="none" />}
        <text x={0} y={h + 16} class="axis">
          {from}
        </text>
        <text x={w} y={h + 16} class="axis" text-anchor="end">
          {to}
        </text>
      </svg>
      <figcaption>
        <span class="legend bar" /> tokens (in + out) <span class="legend cost" /> estimated cost (USD), peak {fmtUsd(maxCost)}/day
      </figcaption>
    </figure>
  );
}
