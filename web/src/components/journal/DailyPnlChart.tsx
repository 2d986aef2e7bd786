// Daily net P&L as bars about a zero line, drawn in SVG at the width it is given (measured, so the axis
// labels keep their size on a phone). One bar per trading day with fills, oldest first. For a screen
// reader the picture is one image with a summary in words; every figure is in the "Daily figures" table.
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { TableHead } from '../../ui.tsx';
import { Money, type JournalDay } from './Figures.tsx';
import { axisMoney, compareDecimal, day, money, signOf } from './format.ts';
import './journal.css';

type Day = Pick<JournalDay, 'tradingDay' | 'netPnl'> & Partial<JournalDay>;

const MARGIN = { left: 62, right: 8, top: 10, bottom: 24 };

/** A step of 1, 2, 2.5 or 5 × 10^k that cuts `span` into about `count` parts. */
function niceStep(span: number, count: number): number {
  const raw = span / count;
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
}

/** The y-axis: ticks from below the lowest bar (or 0) to above the highest (or 0). Geometry only. */
function axisTicks(values: number[]): number[] {
  let lo = Math.min(0, ...values);
  let hi = Math.max(0, ...values);
  if (hi === lo) hi = lo + 1;
  const step = niceStep(hi - lo, 4);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const ticks: number[] = [];
  for (let i = 0; lo + i * step <= hi + step / 2 && i < 20; i++) ticks.push(Number((lo + i * step).toPrecision(12)));
  return ticks;
}

/** Which bars to try to label first: as many as could fit ~100 px apart, spread evenly, the first and the last included. */
function dayLabels(n: number, plotWidth: number): number[] {
  const m = Math.min(n, Math.max(1, Math.floor(plotWidth / 100)));
  if (m <= 0) return [];
  if (m === 1) return [n - 1];
  return [...new Set(Array.from({ length: m }, (_, k) => Math.round((k * (n - 1)) / (m - 1))))];
}

/** Gap kept between two date labels. */
const LABEL_GAP = 12;

let measurer: CanvasRenderingContext2D | null | undefined;
/** A label's width in the axis font (11 px), measured; estimated when there is no canvas. */
function labelWidth(text: string): number {
  if (measurer === undefined) {
    measurer = document.createElement('canvas').getContext('2d');
    if (measurer) measurer.font = `11px ${getComputedStyle(document.body).fontFamily}`;
  }
  return Math.ceil(measurer ? measurer.measureText(text).width : text.length * 6.5) + 2;
}

export interface PlacedLabel {
  readonly index: number;
  readonly x: number;
  readonly text: string;
}

/**
 * The date labels under the bars, each whole inside [left, right] and at least LABEL_GAP from the next:
 * the last day first, then the first, then evenly spread ones; a label that would touch one already
 * placed is left out.
 */
function placeLabels(
  texts: string[],
  center: (i: number) => number,
  left: number,
  right: number,
  plotWidth: number,
  width: (t: string) => number = labelWidth,
): PlacedLabel[] {
  const n = texts.length;
  if (n === 0) return [];
  const order = [n - 1, 0, ...dayLabels(n, plotWidth)];
  const placed: { index: number; x: number; text: string; a: number; b: number }[] = [];
  for (const i of order) {
    if (placed.some((p) => p.index === i)) continue;
    const text = texts[i] ?? '';
    const w = width(text);
    if (w > right - left) continue;
    const x = Math.min(Math.max(center(i), left + w / 2), right - w / 2);
    const a = x - w / 2;
    const b = x + w / 2;
    if (placed.some((p) => a < p.b + LABEL_GAP && b > p.a - LABEL_GAP)) continue;
    placed.push({ index: i, x, text, a, b });
  }
  return placed.sort((p, q) => p.index - q.index).map(({ index, x, text }) => ({ index, x, text }));
}

/** A day the chart draws: something was realized (a day of fees alone has no bar to show). */
const drawn = (d: Day): boolean => d.realizedPnl === undefined || signOf(d.realizedPnl) !== 0;

/** The chart in words: the days it draws, up and down, the best and the worst, and the days it leaves out. */
function chartSummary(days: Day[], currency: string, from: string, to: string): string {
  const range = `Daily net P&L from ${day(from)} to ${day(to)}`;
  if (days.length === 0) return `${range}: no fills.`;
  const bars = days.filter(drawn);
  const feesOnly = days.length - bars.length;
  const left = feesOnly === 0 ? '' : ` ${feesOnly} more day${feesOnly === 1 ? '' : 's'} with fills and nothing realized (fees only) not drawn.`;
  if (bars.length === 0) return `${range}: nothing realized.${left}`;
  const up = bars.filter((d) => signOf(d.netPnl) > 0).length;
  const down = bars.filter((d) => signOf(d.netPnl) < 0).length;
  const sorted = [...bars].sort((a, b) => compareDecimal(a.netPnl, b.netPnl));
  const best = sorted.at(-1) as Day;
  const worst = sorted[0] as Day;
  const m = (d: Day) => `${money(d.netPnl, currency, { signed: true }).text} on ${day(d.tradingDay)}`;
  const drawnWords = `${bars.length} trading day${bars.length === 1 ? '' : 's'} with realized P&L, ${up} up, ${down} down`;
  return `${range}: ${drawnWords}; best ${m(best)}, worst ${m(worst)}.${left}`;
}

export function DailyPnlChart({
  days,
  currency,
  from,
  to,
  height = 220,
  figuresTable = true,
}: {
  /** Undefined while the journal loads: the box keeps its size. */
  days: Day[] | undefined;
  currency: string;
  from: string;
  to: string;
  height?: number;
  figuresTable?: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(640);
  // Measured before the first paint, so the picture is drawn once at its size (nothing moves).
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setWidth(Math.max(240, Math.round(el.clientWidth)));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const all = days ?? [];
  const bars = all.filter(drawn);
  const summary = days ? chartSummary(days, currency, from, to) : '';
  // Bar heights need numbers: each day's figure is read once for its own bar (never added up).
  const values = bars.map((d) => Number(d.netPnl));
  const ticks = axisTicks(values);
  const tMin = ticks[0] ?? 0;
  const tMax = ticks.at(-1) ?? 1;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const y = (v: number) => MARGIN.top + ((tMax - v) / (tMax - tMin)) * plotH;
  const slot = plotW / Math.max(bars.length, 1);
  const bw = Math.max(2, Math.min(48, slot * 0.72));
  const zero = y(0);
  const labels = placeLabels(
    bars.map((d) => day(d.tradingDay)),
    (i) => MARGIN.left + (i + 0.5) * slot,
    4,
    width - 4,
    plotW,
  );

  return (
    <figure class="jr-chart">
      <div ref={box} class="jr-chart-box" style={{ minHeight: `${height}px` }}>
        {!days ? null : bars.length === 0 ? (
          <p class="hint">{all.length === 0 ? `No fills from ${day(from)} to ${day(to)}.` : summary}</p>
        ) : (
          <svg width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label={summary} data-testid="pnl-chart">
            {ticks.map((t) => (
              <g key={t}>
                <line class={t === 0 ? 'jr-zero' : 'jr-grid'} x1={MARGIN.left} x2={width - MARGIN.right} y1={y(t)} y2={y(t)} />
                <text class="jr-axis" x={MARGIN.left - 6} y={y(t)} text-anchor="end" dominant-baseline="middle">
                  {axisMoney(t, currency)}
                </text>
              </g>
            ))}
            {bars.map((d, i) => {
              const v = values[i] ?? 0;
              const s = signOf(d.netPnl);
              // Every bar drawn is seen: 2 px at least, a flat day as a mark on the zero line.
              const h = Math.max(2, Math.abs(y(v) - zero));
              const top = s > 0 ? zero - h : s < 0 ? zero : zero - 1;
              return (
                <rect
                  key={d.tradingDay}
                  class={`jr-bar ${s > 0 ? 'up' : s < 0 ? 'down' : 'flat'}`}
                  x={MARGIN.left + i * slot + (slot - bw) / 2}
                  y={top}
                  width={bw}
                  height={h}
                  data-day={d.tradingDay}
                >
                  <title>
                    {day(d.tradingDay)}: {money(d.netPnl, currency, { signed: true }).text}
                  </title>
                </rect>
              );
            })}
            <line class="jr-zero" x1={MARGIN.left} x2={width - MARGIN.right} y1={zero} y2={zero} />
            {labels.map((l) => (
              <text key={l.index} class="jr-axis jr-date" x={l.x} y={height - 6} text-anchor="middle">
                {l.text}
              </text>
            ))}
          </svg>
        )}
      </div>
      {/* The same words as the image's name: seen, not read twice. */}
      <figcaption class="hint" aria-hidden="true">
        {bars.length > 0 ? summary : ''}
      </figcaption>
      {figuresTable && all.length > 0 && (
        <details class="jr-details">
          <summary>Daily figures</summary>
          <div class="jr-scroll" role="region" aria-label="Daily figures" tabIndex={0}>
            <table class="table compact">
              <caption class="sr-only">Daily figures</caption>
              <TableHead
                columns={[
                  'Trading day',
                  { label: 'Fills', num: true },
                  { label: 'Round trips', num: true },
                  { label: 'Realized P&L', num: true },
                  { label: 'Fees', num: true },
                  { label: 'Net P&L', num: true },
                ]}
              />
              <tbody>
                {[...all].reverse().map((d) => (
                  <tr key={d.tradingDay}>
                    <th scope="row">{day(d.tradingDay)}</th>
                    <td class="num">{d.fills ?? '—'}</td>
                    <td class="num">{d.roundTrips ?? '—'}</td>
                    <td class="num">
                      <Money value={d.realizedPnl} currency={currency} signed />
                    </td>
                    <td class="num">
                      <Money value={d.fees} currency={currency} />
                    </td>
                    <td class="num">
                      <Money value={d.netPnl} currency={currency} signed tone />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      )}
    </figure>
  );
}
