import { pino, type DestinationStream, type Logger } from 'pino';

/** Everything that may carry a secret is redacted wherever it appears in a log line. */
const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["stripe-signature"]',
  'headers.authorization',
  'headers["stripe-signature"]',
  'authorization',
  'apiKey',
  '*.apiKey',
  '*.*.apiKey',
  'dataBase64',
  '*.dataBase64',
  '*.*.dataBase64',
  'key',
  '*.key',
  'secret',
  '*.secret',
  'token',
  '*.token',
];

/** Log lines are written in batches of about this many bytes… */
const LOG_BATCH_BYTES = 4096;
/** …or this often, whichever comes first. */
const LOG_FLUSH_MS = 250;

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
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
