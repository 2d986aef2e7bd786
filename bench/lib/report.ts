// The result table: printed, and written into docs/PERFORMANCE.md between the bench markers so that
// other sections of that file (e.g. "Key saves", written by bench/key-save.ts) stay as they are.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Machine } from './machine.ts';
import { ROOT } from './procs.ts';

export interface Row {
  readonly id: string;
  readonly title: string;
  readonly service: string;
  readonly baseline: string;
  /** Ratio or difference against the baseline. */
  readonly result: string;
  readonly goal: string;
  /** undefined: no goal, or not measured. */
  readonly met: boolean | undefined;
  /** The "how measured" paragraph. */
  readonly how: string;
  /** Extra lines printed after the table (e.g. CPU per request). */
  readonly notes?: readonly string[];
}

export interface RunInfo {
  readonly date: string;
  readonly machine: Machine;
  readonly postgres: string;
  readonly redis: string;
  readonly command: string;
  readonly wallSeconds: number;
  /** 1-minute load average at start and end. */
  readonly load: string;
  /** CPU steal during the run (the hypervisor running other work on this VM's vCPUs). */
  readonly steal: string;
}

const BEGIN = '<!-- bench:begin -->';
const END = '<!-- bench:end -->';

const cell = (s: string): string => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

export function table(rows: readonly Row[]): string {
  const lines = ['| Benchmark | Service | Baseline | Result | Goal | Met |', '|---|---|---|---|---|---|'];
  for (const r of rows) {
    const met = r.met === undefined ? '—' : r.met ? 'yes' : '**no**';
    lines.push(`| ${[r.title, r.service, r.baseline, r.result, r.goal].map(cell).join(' | ')} | ${met} |`);
  }
  return lines.join('\n');
}

export function section(rows: readonly Row[], run: RunInfo): string {
  const m = run.machine;
  const notes = rows.flatMap((r) => (r.notes ?? []).map((n) => `- ${r.title}: ${n}`));
  return [
    BEGIN,
    '## Benchmarks',
    '',
    `- Date: ${run.date}`,
    `- Machine: ${m.cpus} × ${m.cpuModel}, ${m.ramGiB} GiB RAM, ${m.kernel}`,
    `- Software: Node ${m.node}, PostgreSQL ${run.postgres}, Redis ${run.redis}`,
    `- Command: \`${run.command}\` (wall time ${Math.round(run.wallSeconds)} s)`,
    `- Load average (1 min): ${run.load}; CPU steal during the run (the host running other work on these vCPUs): ${run.steal}`,
    '',
    'Everything runs on the one machine: the service (`node src/server.ts`, its own process), each baseline (its own',
    'process), the fake upstream (its own process), PostgreSQL, Redis and the load generator (the bench process) share its',
    'cores, and so does any other work on it (see the load average). Rates and latencies move by a third between runs on a',
    'busy machine; the CPU-per-unit figures (server user + system time per delta, stream or request) move much less.',
    '',
    table(rows),
    '',
    ...(notes.length > 0 ? ['Details:', '', ...notes, ''] : []),
    '### How measured',
    '',
    ...rows.flatMap((r) => [`**${r.title}.** ${r.how}`, '']),
    END,
  ].join('\n');
}

/** Replaces the marked section, or puts it right under the title of a file without one. */
export function writePerformanceDoc(content: string): string {
  const file = path.join(ROOT, 'docs', 'PERFORMANCE.md');
  const current = existsSync(file) ? readFileSync(file, 'utf8') : '# Performance\n';
  const begin = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  let next: string;
  if (begin >= 0 && end > begin) {
    next = `${current.slice(0, begin)}${content}${current.slice(end + END.length)}`;
  } else {
    const title = /^# .*\n/m.exec(current);
    const at = title ? title.index + title[0].length : 0;
    const head = current.slice(0, at);
    const rest = current.slice(at).replace(/^\n+/, '');
    next = `${head}${head ? '\n' : ''}${content}\n${rest ? `\n${rest}` : ''}`;
  }
  writeFileSync(file, next.endsWith('\n') ? next : `${next}\n`);
  return file;
}
