// DESIGN §16: the process's descriptor limit, from which MAX_OPEN_STREAMS is derived by default.
import { readFileSync } from 'node:fs';

/**
 * This process's soft RLIMIT_NOFILE (Node raises it to the hard limit as it starts), read from
 * /proc/self/limits; undefined where there is no such file (not Linux) or it says "unlimited".
 */
export function descriptorLimit(limitsFile = '/proc/self/limits'): number | undefined {
  let text: string;
  try {
    text = readFileSync(limitsFile, 'utf8');
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\S+)/m.exec(text)?.[1];
  const n = Number(soft);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Descriptors kept out of the streams' share: the PostgreSQL pool's come on top (Redis, LISTEN, logs, stdio, DNS, key probes, plain requests). */
const DESCRIPTOR_RESERVE = 128;

/** Assumed where the limit cannot be read. */
const UNKNOWN_LIMIT = 4096;

/**
 * The default MAX_OPEN_STREAMS: a stream costs up to two descriptors (the client's socket and, for a
 * live turn, the provider call's), after the reserve and the PostgreSQL pool. RLIMIT_NOFILE 20,000 with
 * a pool of 20 → 9,926.
 */
export function defaultMaxOpenStreams(limit: number | undefined, databasePoolSize: number): number {
  return Math.max(1, Math.floor(((limit ?? UNKNOWN_LIMIT) - DESCRIPTOR_RESERVE - databasePoolSize) / 2));
}
