// Daily net P&L as a month calendar. A day with fills says its figure in text (signed, so colour is never
// the only cue) and is a button: it shows the day's full figures below the month. The month steps within
// the page's range.
import { useEffect, useState } from 'preact/hooks';
import { Money, type JournalDay } from './Figures.tsx';
import type { Range } from './filters.ts';
import { compactMoney, day, signOf } from './format.ts';

const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
const monthName = new Intl.DateTimeFormat(undefined, { month: 'long', year: 'numeric', timeZone: 'UTC' });

/** "2026-03" → its weeks (Monday first), each a list of 7 dates or null outside the month. */
function monthWeeks(month: string): (string | null)[][] {
  const first = new Date(`${month}-01T00:00:00Z`);
  const days = new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 0)).getUTCDate();
  const lead = (first.getUTCDay() + 6) % 7;
  const cells: (string | null)[] = [...Array<null>(lead).fill(null)];
  for (let d = 1; d <= days; d++) cells.push(`${month}-${String(d).padStart(2, '0')}`);
  while (cells.length % 7 !== 0) cells.push(null);
  return Array.from({ length: cells.length / 7 }, (_, w) => cells.slice(w * 7, w * 7 + 7));
}

const shiftMonth = (month: string, n: number): string => {
  const d = new Date(`${month}-01T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() + n);
  return d.toISOString().slice(0, 7);
};

export function PnlCalendar({ days, currency, range }: { days: JournalDay[] | undefined; currency: string; range: Range | undefined }) {
  const last = range?.to.slice(0, 7) ?? '';
  const first = range?.from.slice(0, 7) ?? '';
  const [month, setMonth] = useState(last);
  const [picked, setPicked] = useState<string | undefined>();
  useEffect(() => {
    setMonth(last);
    setPicked(undefined);
  }, [first, last]);
  const byDay = new Map((days ?? []).map((d) => [d.tradingDay, d]));
  const chosen = picked ? byDay.get(picked) : undefined;
  const title = month ? monthName.format(Date.parse(`${month}-01T00:00:00Z`)) : 'Calendar';
  return (
    <section aria-labelledby="calendar-title">
      <div class="jr-section-head">
        <h2 id="calendar-title">Calendar</h2>
        <div class="actions" role="group" aria-label="Month">
          <button type="button" class="secondary small" disabled={!month || month <= first} onClick={() => setMonth(shiftMonth(month, -1))}>
            ‹ <span class="sr-only">Previous month</span>
          </button>
          <span class="jr-month" aria-live="polite">
            {title}
          </span>
          <button type="button" class="secondary small" disabled={!month || month >= last} onClick={() => setMonth(shiftMonth(month, 1))}>
            <span class="sr-only">Next month</span> ›
          </button>
        </div>
      </div>
      <table class="jr-calendar">
        <caption class="sr-only">Daily net P&L, {title}</caption>
        <thead>
          <tr>
            {WEEKDAYS.map((w) => (
              <th key={w} scope="col">
                {w}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {(month ? monthWeeks(month) : []).map((week, i) => (
            <tr key={i}>
              {week.map((date, k) => (
                <td key={date ?? `x${k}`}>{date && <DayCell date={date} figures={byDay.get(date)} currency={currency} onPick={setPicked} />}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      <p class="hint jr-day-detail" role="status">
        {chosen ? <DayDetail d={chosen} currency={currency} /> : 'Choose a day with fills for its figures.'}
      </p>
    </section>
  );
}

function DayCell({ date, figures, currency, onPick }: { date: string; figures: JournalDay | undefined; currency: string; onPick: (d: string) => void }) {
  const n = Number(date.slice(8));
  if (!figures) return <span class="jr-cal-day">{n}</span>;
  const s = signOf(figures.netPnl);
  const tone = s > 0 ? 'gain' : s < 0 ? 'loss' : 'flat';
  const words = s > 0 ? 'gain' : s < 0 ? 'loss' : 'flat';
  return (
    <button type="button" class={`jr-cal-cell ${tone}`} data-day={date} onClick={() => onPick(date)}>
      <span class="sr-only">{day(date)}: </span>
      <span class="jr-cal-day" aria-hidden="true">
        {n}
      </span>
      <span class="jr-cal-pnl">{compactMoney(figures.netPnl, currency)}</span>
      <span class="sr-only"> net, a {words}</span>
    </button>
  );
}

function DayDetail({ d, currency }: { d: JournalDay; currency: string }) {
  return (
    <>
      {day(d.tradingDay)}: net <Money value={d.netPnl} currency={currency} signed /> (realized <Money value={d.realizedPnl} currency={currency} signed />, fees{' '}
      <Money value={d.fees} currency={currency} />) · {d.fills} fill{d.fills === 1 ? '' : 's'} · {d.roundTrips} round trip{d.roundTrips === 1 ? '' : 's'}
    </>
  );
}
