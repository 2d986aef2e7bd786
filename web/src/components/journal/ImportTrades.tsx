// Importing a broker's file (DESIGN §17): the file is sent as it is and read by the service. Choosing it
// runs a dry run first — the layout it detected, the zone it read times in, the counts and the first
// trades as they would be stored — and nothing is written until "Import N trades". Cancel leaves nothing.
import { useRef, useState } from 'preact/hooks';
import { api, ApiError, authorizedFetch, errorOf, explain, must, type Schemas } from '../../api/client.ts';
import { useAction, useLoad } from '../../ui.tsx';
import { ImportPreview, RejectedRows, type ImportOptions } from './ImportPreview.tsx';
import './journal.css';

export type ImportReport = Schemas['TradeImportReport'];

/** DESIGN §14: at most 5 MiB a file. */
const MAX_BYTES = 5 * 1024 * 1024;
const TOO_BIG = 'The file is larger than 5 MiB. Split it and import the parts.';

/** A refusal of an import in words (the codes mean something else for a chat message). */
function importProblem(err: unknown): string {
  if (err instanceof ApiError && err.code === 'PAYLOAD_TOO_LARGE') return TOO_BIG;
  if (err instanceof ApiError && err.code === 'VALIDATION_ERROR')
    return `The file could not be read as trades: ${err.details[0]?.message ?? err.message}. Nothing was imported.`;
  return explain(err);
}

async function sendFile(accountId: string, file: File, options: ImportOptions, dryRun: boolean): Promise<ImportReport> {
  const q = new URLSearchParams();
  if (dryRun) q.set('dryRun', 'true');
  if (options.format) q.set('format', options.format);
  if (options.timezone) q.set('timezone', options.timezone);
  const response = await authorizedFetch(`/api/accounts/${encodeURIComponent(accountId)}/trades/import?${q.toString()}`, {
    method: 'POST',
    headers: { 'content-type': 'text/csv' },
    body: file,
  });
  if (!response.ok) throw await errorOf(response);
  return (await response.json()) as ImportReport;
}

export function ImportTrades({
  accountId,
  timezone,
  currency,
  onImported,
}: {
  accountId: string;
  timezone: string | undefined;
  currency: string;
  onImported: () => void;
}) {
  const formats = useLoad(() => must(api.GET('/api/journal/import-formats')));
  const [file, setFile] = useState<File | undefined>();
  const [options, setOptions] = useState<ImportOptions>({});
  const [preview, setPreview] = useState<ImportReport | undefined>();
  const [report, setReport] = useState<ImportReport | undefined>();
  const [tooBig, setTooBig] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const action = useAction();

  const check = async (f: File, o: ImportOptions) => {
    setOptions(o);
    const result = await action.run(() => sendFile(accountId, f, o, true));
    if (result) setPreview(result);
  };
  const choose = (f: File | undefined) => {
    setFile(f);
    setPreview(undefined);
    setReport(undefined);
    setTooBig(false);
    action.clear();
    if (!f) return;
    if (f.size > MAX_BYTES) return setTooBig(true);
    void check(f, {});
  };
  // Back to the file field: where the trader started, ready for the next file.
  const reset = () => {
    setFile(undefined);
    setPreview(undefined);
    if (input.current) {
      input.current.value = '';
      input.current.focus();
    }
  };
  const write = async () => {
    if (!file) return;
    const result = await action.run(() => sendFile(accountId, file, options, false));
    if (!result) return;
    setReport(result);
    reset();
    onImported();
  };

  const problem = tooBig ? TOO_BIG : action.error !== undefined ? importProblem(action.error) : undefined;
  const names = formats.data?.formats ?? [];
  return (
    <section class="card jr-import" aria-labelledby="import-title">
      <h2 id="import-title">Import trades</h2>
      <p class="hint" id="import-hint">
        A CSV export of your broker ({names.length > 0 ? brokers(names) : 'the layouts the service reads'}) or a file with the columns <code>symbol</code>,{' '}
        <code>side</code>, <code>quantity</code>, <code>price</code>, <code>executedAt</code>. You see what it holds before anything is written; rows already in
        the journal are not added twice.
      </p>
      <label class="jr-file">
        CSV file
        <input
          ref={input}
          type="file"
          accept=".csv,.txt,text/csv,text/plain"
          aria-describedby="import-hint"
          onChange={(e) => choose(e.currentTarget.files?.[0])}
        />
      </label>
      {action.busy && !preview && <p class="hint">Checking the file…</p>}
      {problem && (
        <div class="problem" role="alert">
          <p>{problem}</p>
        </div>
      )}
      {file && preview && (
        <ImportPreview
          file={file.name}
          preview={preview}
          formats={names}
          options={options}
          accountZone={timezone}
          currency={currency}
          busy={action.busy}
          onCheck={(o) => void check(file, o)}
          onImport={() => void write()}
          onCancel={reset}
        />
      )}
      <p role="status" class="sr-only">
        {action.busy && !preview ? 'Checking the file…' : report ? reportWords(report) : ''}
      </p>
      {report && <Done report={report} />}
    </section>
  );
}

/** The brokers whose files the service reads, each once ("Interactive Brokers" has two layouts). */
const brokers = (formats: { id: string; name: string }[]) =>
  [...new Set(formats.filter((f) => f.id !== 'generic').map((f) => f.name.split(' — ')[0]))].join(', ');

const reportWords = (r: ImportReport) => `Imported ${r.imported}, ${r.duplicates} already in the journal, ${r.skipped} skipped, ${r.rejectedCount} rejected.`;

function Done({ report }: { report: ImportReport }) {
  return (
    <div class="jr-import-report">
      <h3>Imported</h3>
      <dl class="jr-report" aria-label="Import report">
        <div>
          <dt>Imported</dt>
          <dd data-testid="import-imported">{report.imported}</dd>
        </div>
        <div>
          <dt>Already in the journal</dt>
          <dd data-testid="import-duplicates">{report.duplicates}</dd>
        </div>
        <div>
          <dt>Skipped</dt>
          <dd data-testid="import-skipped">{report.skipped}</dd>
        </div>
        <div>
          <dt>Rejected</dt>
          <dd data-testid="import-rejected">{report.rejectedCount}</dd>
        </div>
      </dl>
      <RejectedRows report={report} />
    </div>
  );
}
