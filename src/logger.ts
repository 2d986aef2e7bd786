import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * Keys whose values may be secrets: censored wherever they appear in a log line, down to CENSOR_DEPTH
 * levels (the line's own fields, theirs, and theirs: `authorization`, `headers.authorization`,
 * `req.headers.authorization`, an error's `config.apiKey`; an array's items count at its level); a child
 * logger's bindings at their top level.
 */
const SECRET_KEYS = new Set(['authorization', 'stripe-signature', 'apiKey', 'dataBase64', 'key', 'secret', 'token']);
const CENSOR_DEPTH = 3;
const CENSOR = '[redacted]';

/**
 * `value` with every secret-named key's value censored: the same object when it holds none (a log
 * line's usual case costs a look at its keys and no copy), else a copy of the objects on the way to
 * them (what the caller logged is never changed). Byte arrays are not walked.
 *
 * Written here rather than with pino's `redact` option: its wildcard paths (`*.apiKey`, which every
 * line must go through) cost 4 µs a line and a copy of the line; this costs a fraction of that.
 */
function censored(value: unknown, depth = CENSOR_DEPTH, inArray = false): unknown {
  if (depth === 0 || value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return value;
  // A value holding one of the objects it is inside (a cycle) is written as pino would write it.
  if (walking.includes(value)) return CIRCULAR;
  const source = value as Record<string, unknown>;
  const isArray = Array.isArray(value);
  // An array's items are at its own level (`*.apiKey` reaches `keys[0].apiKey` as it does `key.apiKey`).
  const below = isArray && !inArray ? depth : depth - 1;
  let copy: Record<string, unknown> | undefined;
  walking.push(value);
  try {
    for (const key of Object.keys(source)) {
      const field = source[key];
      const next = SECRET_KEYS.has(key) ? CENSOR : censored(field, below, isArray);
      if (next === field) continue;
      copy ??= copyOf(value);
      copy[key] = next;
    }
  } finally {
    walking.pop();
  }
  return copy ?? value;
}

/** The objects `censored` is inside, outermost first (a log call is synchronous: one walk at a time). */
const walking: object[] = [];
const CIRCULAR = '[Circular]';

/** A shallow copy; an error's keeps its kind, message, stack and cause (pino writes them as it would the original's). */
function copyOf(value: object): Record<string, unknown> {
  if (Array.isArray(value)) return [...(value as unknown[])] as unknown as Record<string, unknown>;
  if (!(value instanceof Error)) return { ...value } as Record<string, unknown>;
  const copy = Object.create(Object.getPrototypeOf(value) as object) as Record<string, unknown>;
  for (const key of Object.getOwnPropertyNames(value)) copy[key] = (value as unknown as Record<string, unknown>)[key];
  return copy;
}

/** A child logger's bindings skip `formatters`; serializers reach their top-level keys (and a line's). */
const SECRET_SERIALIZERS = Object.fromEntries([...SECRET_KEYS].map((key) => [key, () => CENSOR]));

/** Log lines are written in batches of about this many bytes… */
const LOG_BATCH_BYTES = 4096;
/** …or this often, whichever comes first. */
const LOG_FLUSH_MS = 250;

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    formatters: { log: (line: Record<string, unknown>) => censored(line) as Record<string, unknown> },
    serializers: { err: pino.stdSerializers.err, ...SECRET_SERIALIZERS },
    base: { service: 'advisor' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  // Asynchronous, batched stdout: lines gather up to 4 KiB (or 250 ms, whichever comes first) and go
  // out in one write(2) off the request path, instead of one write per line (two lines a turn). A
  // line reaches the log at most 250 ms late. server.ts flushes before exiting, and pino flushes
  // synchronously on any other exit (an uncaught exception); only a killed process loses the last
  // 250 ms of lines.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS }));
}

export type { Logger };
