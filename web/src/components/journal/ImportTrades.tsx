// Importing a broker's CSV: the file is sent as it is (text/csv, the service parses it), and the report
// comes back — imported, duplicates, and each rejected row with its code.
import { useRef, useState } from 'preact/hooks';
import { ApiError, authorizedFetch, errorOf, explain, type Schemas } from '../../api/client.ts';
import { TableHead, useAction } from '../../ui.tsx';
import './journal.css';

export type ImportReport = Schemas['TradeImportReport'];

/** DESIGN §14: at most 5 MiB a file. */
const MAX_BYTES = 5 * 1024 * 1024;

/** A refusal of an import in words (the codes mean something else for a chat message). */
function importProblem(err: unknown): string {
  if (err instanceof ApiError && err.code === 'PAYLOAD_TOO_LARGE') return 'The file is larger than 5 MiB. Split it and import the parts.';
  if (err instanceof ApiError && err.code === 'VALIDATION_ERROR')
    return `The file could not be read as trades: ${err.details[0]?.message ?? err.message}. Nothing was imported.`;
  return explain(err);
}

export function ImportTrades({ accountId, onImported }: { accountId: string; onImported: () => void }) {
  const [file, setFile] = useState<File | undefined>();
  const [report, setReport] = useState<ImportReport | undefined>();
  const [tooBig, setTooBig] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const action = useAction();

  const submit = async (e: Event) => {
    e.preventDefault();
    if (!file) return;
    setTooBig(false);
    if (file.size > MAX_BYTES) {
      setTooBig(true);
      return;
    }
    const result = await action.run(async () => {
      const response = await authorizedFetch(`/api/accounts/${encodeURIComponent(accountId)}/trades/import`, {
        method: 'POST',
        headers: { 'content-type': 'text/csv' },
        body: file,
      });
      if (!response.ok) throw await errorOf(response);
      return (await response.json()) as ImportReport;
    });
    if (result) {
      setReport(result);
      setFile(undefined);
      if (input.current) input.current.value = '';
      onImported();
    }
  };

  const problem = tooBig
    ? 'The file is larger than 5 MiB. Split it and import the parts.'
    : action.error !== undefined
      ? importProblem(action.error)
      : undefined;
  return (
    <section class="card jr-import" aria-labelledby="import-title">
      <h2 id="import-title">Import trades</h2>
      <p class="hint" id="import-hint">
        A CSV file with a header row naming the columns <code>symbol</code>, <code>side</code>, <code>quantity</code>, <code>price</code>,{' '}
        <code>executedAt</code> and, if you have them, <code>fee</code>, <code>externalId</code>, <code>note</code> — in any order. Rows already in the journal
        are skipped, so a file can be imported again.
      </p>
      <form class="jr-filters" onSubmit={submit}>
        <label>
          CSV file
          <input
            ref={input}
            type="file"
            accept=".csv,text/csv"
            aria-describedby="import-hint"
            onChange={(e) => {
              setFile(e.currentTarget.files?.[0]);
              setTooBig(false);
              action.clear();
            }}
          />
        </label>
        <button type="submit" disabled={!file || action.busy}>
          {action.busy ? 'Importing…' : 'Import'}
        </button>
      </form>
      {problem && (
        <div class="problem" role="alert">
          <p>{problem}</p>
        </div>
      )}
      <p role="status" class="sr-only">
        {report ? `Imported ${report.imported}, ${report.duplicates} already in the journal, ${report.rejectedCount} rejected.` : ''}
      </p>
      {report && <Report report={report} />}
    </section>
  );
}

function Report({ report }: { report: ImportReport }) {
  return (
    <div class="jr-import-report">
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
          <dt>Rejected</dt>
          <dd data-testid="import-rejected">{report.rejectedCount}</dd>
        </div>
      </dl>
      {report.rejected.length > 0 && (
        <div class="jr-scroll" role="region" aria-label="Rejected rows" tabIndex={0}>
          <table class="table compact">
            <caption>
              Rejected rows{report.rejectedCount > report.rejected.length ? ` (the first ${report.rejected.length} of ${report.rejectedCount})` : ''}{' '}
              <span class="hint">— row 1 is the first line after the header</span>
            </caption>
            <TableHead columns={[{ label: 'Row', num: true }, 'Code', 'Why']} />
            <tbody>
              {report.rejected.map((r) => (
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
      )}
    </div>
  );
}
