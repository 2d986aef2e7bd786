// The range of trading days and the symbol the whole Journal page shows: one form, applied together, kept
// in the address. Drawn at once (disabled until the account's today is known) so the page never moves.
import { useEffect, useState } from 'preact/hooks';
import { lastDays, type Range } from './filters.ts';

/** The service's longest range: three years, 1,096 days apart at most. */
const PRESETS = [
  { label: '30 days', days: 30 },
  { label: '1 year', days: 365 },
  { label: '3 years', days: 1096 },
];

export function FiltersForm({
  range,
  symbol,
  today,
  onApply,
}: {
  range: Range | undefined;
  symbol: string;
  today: string | undefined;
  onApply: (range: Range, symbol: string) => void;
}) {
  const [from, setFrom] = useState(range?.from ?? '');
  const [to, setTo] = useState(range?.to ?? '');
  const [text, setText] = useState(symbol);
  // Back and forward change the address: the fields follow it.
  useEffect(() => {
    setFrom(range?.from ?? '');
    setTo(range?.to ?? '');
  }, [range?.from, range?.to]);
  useEffect(() => setText(symbol), [symbol]);
  const ready = range !== undefined;
  const typed = () => text.trim().toUpperCase();
  return (
    <form
      class="jr-filters"
      aria-label="Filters"
      onSubmit={(e) => {
        e.preventDefault();
        if (from && to) onApply({ from, to }, typed());
      }}
    >
      <label>
        From
        <input type="date" required disabled={!ready} value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />
      </label>
      <label>
        To
        <input type="date" required disabled={!ready} value={to} min={from} onChange={(e) => setTo(e.currentTarget.value)} />
      </label>
      <label>
        Symbol
        <input class="symbol" value={text} maxLength={24} placeholder="All" onInput={(e) => setText(e.currentTarget.value)} />
      </label>
      <button type="submit" disabled={!ready}>
        Show
      </button>
      {symbol && range && (
        <button type="button" class="secondary" onClick={() => onApply(range, '')}>
          All symbols
        </button>
      )}
      <span class="actions" role="group" aria-label="Quick ranges">
        {PRESETS.map((p) => (
          <button key={p.days} type="button" class="secondary small" disabled={!today} onClick={() => today && onApply(lastDays(today, p.days), typed())}>
            <span class="sr-only">Last </span>
            {p.label}
          </button>
        ))}
      </span>
    </form>
  );
}
