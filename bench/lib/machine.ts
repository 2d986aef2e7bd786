import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface Machine {
  readonly cpus: string;
  readonly cpuModel: string;
  readonly ramGiB: string;
  readonly node: string;
  readonly kernel: string;
}

export function machine(): Machine {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown CPU';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m?.[1]) cpuModel = m[1].trim();
  } catch {
    // not Linux: os.cpus() it is
  }
  let cpus: string;
  try {
    cpus = execFileSync('nproc', { encoding: 'utf8' }).trim();
  } catch {
    cpus = String(os.availableParallelism());
  }
  return {
    cpus,
    cpuModel,
    ramGiB: (os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    kernel: `${os.type()} ${os.release()}`,
  };
}

/** 1-minute load average: other work on the machine skews every row, so the report states it. */
export function loadAverage(): string {
  return os.loadavg()[0]?.toFixed(2) ?? 'n/a';
}

/**
 * CPU steal so far, in ms (Linux guests): time the hypervisor ran something else while this VM's vCPUs
 * had work. Every process stalls at once when it happens, so the report states it.
 */
export function stealMs(): number | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]?.trim().split(/\s+/) ?? [];
    const steal = Number(fields[8]);
    // /proc/stat counts in USER_HZ ticks, 100 per second on Linux.
    return Number.isFinite(steal) ? steal * 10 : undefined;
  } catch {
    return undefined;
  }
}
