// The dry run of an import, before anything is written: the layout read (and a way to choose another), the
// zone times without an offset were read in (and a way to choose another), the counts, the first rejected
// rows and the first 20 trades as they would be stored.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../../api/client.ts';
import { TableHead, useLoad } from '../../ui.tsx';
import { Money, Price, SymbolCell } from './Figures.tsx';
import { dateTimeIn, decimal } from './format.ts';

type ImportReport = Schemas['TradeImportReport'];
type Format = Schemas['ImportFormats']['formats'][number];

export interface ImportOptions {
  /** A layout id; absent: detected from the header. */
  readonly format?: string;
  /** An IANA zone for times without an offset; absent: the account's. */
  readonly timezone?: string;
}

/** Rejected rows shown at once (the service lists up to 100). */
const REJECTED_SHOWN = 10;

export function ImportPreview({
  file,
  preview,
  formats,
  options,
  accountZone,
  currency,
  busy,
  onCheck,
  onImport,
  onCancel,
}: {
  file: string;
  preview: ImportReport;
  formats: Format[];
  options: ImportOptions;
  accountZone: string | undefined;
  currency: string;
  busy: boolean;
  onCheck: (o: ImportOptions) => void;
  onImport: () => void;
  onCancel: () => void;
}) {
  const name = formats.find((f) => f.id === preview.format)?.name ?? preview.format;
  const n = preview.imported;
  const shownZone = preview.timezone ?? accountZone ?? 'UTC';
  return (
    <div class="jr-preview" role="group" aria-labelledby="preview-title">
      <h3 id="preview-title">Before importing {file}</h3>
      <dl class="jr-report jr-read-as">
        <div>
          <dt>Format</dt>
          <dd data-testid="preview-format">
            {name} <span class="hint">({options.format ? 'chosen' : 'detected'})</span>
          </dd>
        </div>
        <div>
          <dt>Times without an offset read in</dt>
          <dd data-testid="preview-timezone">{preview.timezone ?? 'none: every time carried its own offset'}</dd>
        </div>
      </dl>
      <ReadAs formats={formats} options={options} zone={preview.timezone ?? accountZone ?? ''} busy={busy} onCheck={onCheck} />
      <dl class="jr-report" aria-label="Dry run">
        {(
          [
            ['To import', n, 'preview-imported'],
            ['Already in the journal', preview.duplicates, 'preview-duplicates'],
            ['Skipped (not executions)', preview.skipped, 'preview-skipped'],
            ['Rejected', preview.rejectedCount, 'preview-rejected'],
          ] as const
        ).map(([label, value, id]) => (
          <div key={id}>
            <dt>{label}</dt>
            <dd data-testid={id}>{value}</dd>
          </div>
        ))}
      </dl>
      <RejectedRows report={preview} limit={REJECTED_SHOWN} />
      <PreviewTable trades={preview.preview ?? []} total={n} zone={accountZone ?? shownZone} currency={currency} />
      <div class="buttons">
        <button type="button" onClick={onImport} disabled={busy || n === 0}>
          {busy ? 'Working…' : n === 0 ? 'Nothing to import' : `Import ${n} trade${n === 1 ? '' : 's'}`}
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </div>
  );
}

/** Another layout or another zone for the same file: the dry run again. */
function ReadAs({
  formats,
  options,
  zone,
  busy,
  onCheck,
}: {
  formats: Format[];
  options: ImportOptions;
  zone: string;
  busy: boolean;
  onCheck: (o: ImportOptions) => void;
}) {
  const zones = useLoad(() => must(api.GET('/api/timezones')));
  const [typed, setTyped] = useState(zone);
  useEffect(() => setTyped(zone), [zone]);
  const list = useMemo(() => (zones.data?.timezones ?? []).map((z) => <option key={z} value={z} />), [zones.data]);
  return (
    <form
      class="jr-filters"
      aria-label="Read the file as"
      onSubmit={(e) => {
        e.preventDefault();
        onCheck({ ...options, timezone: typed.trim() || undefined });
      }}
    >
      <label>
        Format
        <select value={options.format ?? ''} disabled={busy} onChange={(e) => onCheck({ ...options, format: e.currentTarget.value || undefined })}>
          <option value="">Detect from the header</option>
          {formats.map((f) => (
            <option key={f.id} value={f.id}>
              {f.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Time zone of times without an offset
        <input list="import-zones" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
        <datalist id="import-zones">{list}</datalist>
      </label>
      <button type="submit" class="secondary" aria-disabled={busy ? 'true' : undefined}>
        Read again
      </button>
    </form>
  );
}

export function RejectedRows({ report, limit = 100 }: { report: ImportReport; limit?: number }) {
  if (report.rejected.length === 0) return null;
  const rows = report.rejected.slice(0, limit);
  return (
    <div class="jr-scroll" role="region" aria-label="Rejected rows" tabIndex={0}>
      <table class="table compact">
        <caption>
          Rejected rows{report.rejectedCount > rows.length ? ` (the first ${rows.length} of ${report.rejectedCount})` : ''}{' '}
          <span class="hint">— row 1 is the first line after the header</span>
        </caption>
        <TableHead columns={[{ label: 'Row', num: true }, 'Code', 'Why']} />
        <tbody>
          {rows.map((r) => (
            <tr key={r.row}>
              <td class="num">{r.row}</td>
              <td>
                <code>{r.code}</code>
              </td>
              <td class="note">{r.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function PreviewTable({ trades, total, zone, currency }: { trades: Schemas['Trade'][]; total: number; zone: string; currency: string }) {
  if (trades.length === 0) return null;
  return (
    <div class="jr-scroll" role="region" aria-label="Trades to import" tabIndex={0}>
      <table class="table compact">
        <caption>
          {trades.length < total ? `The first ${trades.length} of ${total} trades` : `The ${total} trade${total === 1 ? '' : 's'}`} as they would be stored{' '}
          <span class="hint">— times in {zone}</span>
        </caption>
        <TableHead columns={['Executed', 'Symbol', 'Side', { label: 'Quantity', num: true }, { label: 'Price', num: true }, { label: 'Fee', num: true }]} />
        <tbody>
          {trades.map((t) => (
            <tr key={t.id}>
              <td>{dateTimeIn(t.executedAt, zone)}</td>
              <SymbolCell symbol={t.symbol} assetClass={t.assetClass} multiplier={t.multiplier} />
              <td>
                <span class={`jr-side ${t.side}`}>{t.side === 'buy' ? 'Buy' : 'Sell'}</span>
              </td>
              <td class="num">{decimal(t.quantity)}</td>
              <td class="num">
                <Price value={t.price} currency={currency} />
              </td>
              <td class="num">
                <Money value={t.fee} currency={currency} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
