import { useEffect, useRef, useState } from 'preact/hooks';

export interface Bar {
  t: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number | null;
}

/**
 * get_price_history bars as a candlestick chart (TradingView's lightweight-charts, loaded on first use so
 * the chat page does not carry it), with the same figures in words for a screen reader.
 */
export function PriceChart({ symbol, interval, bars }: { symbol: string; interval: string; bars: Bar[] }) {
  const box = useRef<HTMLDivElement>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    const el = box.current;
    if (!el || bars.length === 0) return;
    let dispose: (() => void) | undefined;
    let live = true;
    import('lightweight-charts')
      .then(({ createChart, CandlestickSeries, ColorType }) => {
        if (!live) return;
        const dark = matchMedia('(prefers-color-scheme: dark)').matches;
        const chart = createChart(el, {
          height: 240,
          autoSize: true,
          layout: { background: { type: ColorType.Solid, color: 'transparent' }, textColor: dark ? '#d4d4d8' : '#3f3f46', attributionLogo: false },
          grid: { vertLines: { visible: false }, horzLines: { color: dark ? '#27272a' : '#e4e4e7' } },
          timeScale: { timeVisible: interval !== '1day', secondsVisible: false },
        });
        const series = chart.addSeries(CandlestickSeries, {
          upColor: '#15803d',
          downColor: '#b91c1c',
          borderVisible: false,
          wickUpColor: '#15803d',
          wickDownColor: '#b91c1c',
        });
        series.setData(bars.map((b) => ({ time: (Date.parse(b.t) / 1000) as never, open: b.open, high: b.high, low: b.low, close: b.close })));
        chart.timeScale().fitContent();
        dispose = () => chart.remove();
      })
      .catch(() => live && setFailed(true));
    return () => {
      live = false;
      dispose?.();
    };
  }, [bars, interval]);
  const first = bars[0];
  const last = bars.at(-1);
  const summary =
    first && last
      ? `${symbol} ${interval} candles from ${first.t.slice(0, 10)} to ${last.t.slice(0, 10)}: ${bars.length} bars, opened ${first.open}, last close ${last.close}, high ${Math.max(...bars.map((b) => b.high))}, low ${Math.min(...bars.map((b) => b.low))}.`
      : `${symbol}: no bars in this range.`;
  return (
    <figure class="chart">
      {bars.length > 0 && !failed && <div ref={box} class="chart-box" role="img" aria-label={summary} data-testid="price-chart" />}
      <figcaption>{summary}</figcaption>
    </figure>
  );
}
