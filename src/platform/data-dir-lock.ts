import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, readlinkSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The lock file inside DATA_DIR. */
export const DATA_DIR_LOCK_FILE = 'advisor.lock';
/** How often a holder shows it is alive (the file's mtime), for processes that cannot see its pid. */
const HEARTBEAT_MS = 5000;
/** A lock from another machine or pid namespace, not refreshed for this long, is taken for abandoned. */
export const FOREIGN_LOCK_STALE_MS = 30_000;

/** Who holds a data directory; written into the lock file. */
export interface LockHolder {
  readonly pid: number;
  /** How the process was started (its command line). */
  readonly command: string;
  readonly startedAt: string;
  readonly host: string;
  /** Linux: which boot and which pid namespace the pid belongs to, and when that process started. */
  readonly bootId?: string;
  readonly pidNamespace?: string;
  readonly processStart?: string;
  readonly nonce: string;
}

export class DataDirLockedError extends Error {
  readonly dataDir: string;
  readonly holder: LockHolder;
  /** For a holder on another host or in another container: how long ago it last refreshed the lock. */
  constructor(dataDir: string, holder: LockHolder, foreignAgeMs?: number) {
    const where = holder.host === os.hostname() ? '' : ` on host ${holder.host}`;
    const foreign =
      foreignAgeMs === undefined
        ? ''
        : ` It runs on another host or in another container and last refreshed the lock ${Math.round(foreignAgeMs / 1000)} s ago; ` +
          `the lock is taken over ${FOREIGN_LOCK_STALE_MS / 1000} s after that.`;
    super(
      `DATA_DIR ${dataDir} is in use by process ${holder.pid}${where} (${holder.command}, started ${holder.startedAt}). ` +
        'The embedded database serves one process at a time: stop that process first, or use another DATA_DIR ' +
        `(or run the service on PostgreSQL with DATABASE_URL).${foreign}`,
    );
    this.name = 'DataDirLockedError';
    this.dataDir = dataDir;
    this.holder = holder;
  }
}

export interface DataDirLock {
  readonly file: string;
  /** Removes the lock file if it is still this process's; idempotent. */
  release(): void;
}

// Lock files this process holds: a lock naming our own pid is ours only if it is in here (the
// previous container or boot may have run under the same pid).
const heldHere = new Set<string>();

/**
 * DESIGN §10: one process per embedded data directory. Node has no flock, so the lock is a file
 * created atomically (hard-linked from a complete temporary file: it appears whole or not at all,
 * and exactly one of two racing processes creates it) that names its holder. A lock whose holder is
 * gone is taken over: on the same machine and pid namespace, by the pid (not alive, a zombie, or
 * reused by a process that started at another time); otherwise by a heartbeat the holder keeps on the
 * file's mtime. A normal exit removes it; after a kill -9 the next process takes it over.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, DATA_DIR_LOCK_FILE);
  const me = currentHolder();
  const text = `${JSON.stringify(me)}\n`;
  const tmp = `${file}.${process.pid}.${me.nonce}.tmp`;
  writeFileSync(tmp, text, { flag: 'wx', mode: 0o600 });
  try {
    for (let attempt = 0; !createdFrom(tmp, file); attempt++) {
      const seen = readLock(file);
      if (seen === undefined) continue;
      if (seen.holder && holderAlive(file, seen.holder, seen.mtimeMs)) {
        throw new DataDirLockedError(dataDir, seen.holder, sameMachine(seen.holder) ? undefined : Date.now() - seen.mtimeMs);
      }
      if (attempt >= 200) throw new Error(`could not take the lock ${file}: other processes keep replacing it`);
      removeStale(file, seen.text, tmp);
    }
  } finally {
    unlinkSync(tmp);
  }
  heldHere.add(file);
  const ours = (): boolean => readLock(file)?.text === text;
  // Only the heartbeat of a lock still ours is kept: a displaced one goes stale.
  const heartbeat = setInterval(() => {
    try {
      if (ours()) utimesSync(file, new Date(), new Date());
    } catch {
      // A lost tick only ages the file; the pid check does not depend on it.
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    clearInterval(heartbeat);
    process.off('exit', release);
    heldHere.delete(file);
    try {
      if (ours()) unlinkSync(file);
    } catch {
      // Gone already.
    }
  };
  // An exit that skips the normal shutdown (an uncaught error, process.exit) still frees the directory.
  process.on('exit', release);
  return { file, release };
}

function readLock(file: string): { text: string; holder: LockHolder | undefined; mtimeMs: number } | undefined {
  try {
    const text = readFileSync(file, 'utf8');
    const mtimeMs = statSync(file).mtimeMs;
    return { text, holder: parseHolder(text), mtimeMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockHolder> | null;
    if (value && Number.isInteger(value.pid) && (value.pid ?? 0) > 0 && typeof value.nonce === 'string') return value as LockHolder;
  } catch {
    // Not a lock this code wrote: taken for stale.
  }
  return undefined;
}

/** Whether the holder's pid can be checked from here: same host, same boot, same pid namespace. */
function sameMachine(holder: LockHolder): boolean {
  const here = currentHolder();
  return holder.host === here.host && holder.bootId === here.bootId && holder.pidNamespace === here.pidNamespace;
}

function holderAlive(file: string, holder: LockHolder, mtimeMs: number): boolean {
  if (!sameMachine(holder)) return Date.now() - mtimeMs < FOREIGN_LOCK_STALE_MS;
  if (holder.pid === process.pid) return heldHere.has(file);
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const now = processStat(holder.pid);
  if (now === undefined) return true;
  if (now.state === 'Z') return false;
  return holder.processStart === undefined || holder.processStart === now.start;
}

/** Hard-links `from` to `to`; false when `to` exists. The new file appears complete, and only one racer creates it. */
function createdFrom(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/**
 * Removes a lock judged stale, under a second lock (`….takeover`, held for the few microseconds of
 * the check and the unlink): without it, a racer that judged the same stale lock could remove the
 * lock another racer has just taken over. A takeover lock whose holder died is removed in turn.
 */
function removeStale(file: string, judged: string, tmp: string): void {
  const guard = `${file}.takeover`;
  if (!createdFrom(tmp, guard)) {
    const other = readLock(guard);
    if (other?.holder && !holderAlive(guard, other.holder, other.mtimeMs)) unlinkIf(guard, other.text);
    else pause(5);
    return;
  }
  try {
    unlinkIf(file, judged);
  } finally {
    unlinkSync(guard);
  }
}

function unlinkIf(file: string, text: string): void {
  if (readLock(file)?.text !== text) return;
  try {
    unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Blocks for `ms` (taking the lock is synchronous; the wait is a few milliseconds at most). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

let self: LockHolder | undefined;

function currentHolder(): LockHolder {
  self ??= {
    pid: process.pid,
    command: commandLine(),
    startedAt: new Date(Date.now() - process.uptime() * 1000).toISOString(),
    host: os.hostname(),
    ...optional('bootId', () => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()),
    ...optional('pidNamespace', () => readlinkSync('/proc/self/ns/pid')),
    ...optional('processStart', () => processStat(process.pid)?.start),
    nonce: '',
  };
  return { ...self, nonce: randomBytes(8).toString('hex') };
}

function optional<K extends string>(key: K, read: () => string | undefined): Partial<Record<K, string>> {
  try {
    const value = read();
    return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
  } catch {
    return {};
  }
}

/** `node src/server.ts`, `node scripts/admin.ts grant carol 100`: paths relative to the working directory. */
function commandLine(): string {
  const [, script, ...args] = process.argv;
  const shown =
    script === undefined ? [] : [path.isAbsolute(script) && script.startsWith(process.cwd() + path.sep) ? path.relative(process.cwd(), script) : script];
  return [path.basename(process.execPath), ...shown, ...args].join(' ');
}

/** Linux: a process's state and start time (clock ticks after boot), from /proc/<pid>/stat. */
function processStat(pid: number): { state: string; start: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0];
    const start = fields[19];
    return state !== undefined && start !== undefined ? { state, start } : undefined;
  } catch {
    return undefined;
  }
}
