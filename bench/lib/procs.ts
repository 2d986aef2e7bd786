// Child processes of a bench run: each writes its output to a log file (nothing is piped through
// this process, so reading logs costs the load generator nothing), readiness is a line in that log,
// and every process started is stopped by stopAll(), also when the run fails.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { once } from 'node:events';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly logFile: string;
  /** First capture group of the readiness pattern (the URL for HTTP servers). */
  readonly ready: string;
  log(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. */
  stop(graceMs?: number): Promise<void>;
  /** Waits for the process to end by itself (stopping it after `timeoutMs`); its exit code. */
  exited(timeoutMs: number): Promise<number | null>;
}

export interface StartOptions {
  readonly env: Record<string, string>;
  readonly args?: readonly string[];
  /** Flags for node itself (e.g. --cpu-prof). */
  readonly nodeArgs?: readonly string[];
  readonly ready?: RegExp;
  readonly timeoutMs?: number;
  /** An IPC channel (process.send in the child). */
  readonly ipc?: boolean;
}

const LISTENING = /listening on (http:\/\/\S+)/;

export class Procs {
  readonly #dir: string;
  readonly #all = new Set<Proc>();
  #seq = 0;

  constructor(dir: string) {
    this.#dir = dir;
    // Last resort: whatever way this process ends, no child outlives it.
    process.once('exit', () => {
      for (const p of this.#all) if (alive(p.child)) p.child.kill('SIGKILL');
    });
  }

  /** `node <script>` from the project root, started as production starts the service. */
  startNode(name: string, script: string, opts: StartOptions): Promise<Proc> {
    return this.#start(name, process.execPath, [...(opts.nodeArgs ?? []), script, ...(opts.args ?? [])], opts);
  }

  startBinary(name: string, command: string, opts: StartOptions): Promise<Proc> {
    return this.#start(name, command, [...(opts.args ?? [])], opts);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#all].map((p) => p.stop(3000)));
  }

  async #start(name: string, command: string, args: string[], opts: StartOptions): Promise<Proc> {
    const logFile = path.join(this.#dir, `${String(++this.#seq).padStart(2, '0')}-${name}.log`);
    const fd = openSync(logFile, 'w');
    let child: ChildProcess;
    try {
      child = spawn(command, args, {
        cwd: ROOT,
        env: opts.env,
        stdio: ['ignore', fd, fd, ...(opts.ipc ? (['ipc'] as const) : [])],
      });
    } finally {
      closeSync(fd);
    }
    const pid = child.pid;
    if (pid === undefined) throw new Error(`${name} did not start`);
    const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
    const proc: Proc = {
      name,
      child,
      pid,
      logFile,
      ready: '',
      log,
      async stop(graceMs = 5000) {
        if (!alive(child)) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      },
      async exited(timeoutMs) {
        if (alive(child)) {
          const timer = setTimeout(() => void proc.stop(1000), timeoutMs);
          await once(child, 'exit');
          clearTimeout(timer);
        }
        return child.exitCode;
      },
    };
    this.#all.add(proc);
    child.once('exit', () => this.#all.delete(proc));
    const pattern = opts.ready ?? LISTENING;
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    while (Date.now() < deadline) {
      const m = pattern.exec(log());
      if (m) return { ...proc, ready: m[1] ?? m[0] };
      if (!alive(child)) throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${tail(log())}`);
      await delay(25);
    }
    await proc.stop(1000);
    throw new Error(`${name} was not ready within ${opts.timeoutMs ?? 30_000} ms:\n${tail(log())}`);
  }
}

export const ROOT = path.resolve(import.meta.dirname, '..', '..');

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

export function tail(text: string, lines = 30): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/** Resident set of a process in bytes (VmRSS). */
function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m?.[1]) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** The median of 5 RSS samples `everyMs` apart (one sample catches a GC mid-way). */
export async function sampleRss(pid: number, everyMs = 500): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    samples.push(rssBytes(pid));
    await delay(everyMs);
  }
  samples.sort((a, b) => a - b);
  return samples[2] ?? 0;
}

let ticksPerSecond: number | undefined;

/** User + system CPU time of a process so far, in milliseconds. */
export function cpuMs(pid: number): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state; utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

/**
 * On-CPU time of a process so far, every thread's (user and system), in milliseconds to the
 * nanosecond, from /proc/<pid>/task/<tid>/schedstat: /proc/<pid>/stat counts in 10 ms ticks, which is
 * a fifth of a bare proxy's round in the paced row. A thread that ended between two readings is not
 * counted; a Node process's threads (V8's platform workers, libuv's pool) live as long as it does.
 */
export function onCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns / 1e6;
}

/** CPU time of processes so far (one that has gone counts nothing). */
export function pidsCpuMs(pids: readonly number[]): number {
  let sum = 0;
  for (const pid of pids) {
    try {
      sum += cpuMs(pid);
    } catch {
      // ended (a backend the pool replaced)
    }
  }
  return sum;
}

let asked = 0;

/**
 * Sends `message` with an id of its own over a child's IPC channel (started with `ipc: true`); resolves
 * with the child's reply carrying that id.
 */
export function ask<T>(proc: Proc, message: object): Promise<T> {
  const id = ++asked;
  const { child } = proc;
  return new Promise<T>((resolve, reject) => {
    const onMessage = (reply: { id?: number }): void => {
      if (reply.id !== id) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(reply as T);
    };
    const onExit = (): void => {
      child.off('message', onMessage);
      reject(new Error(`${proc.name} exited before it answered`));
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.send({ id, ...message }, (err) => err && reject(err));
  });
}
