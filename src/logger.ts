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

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: 'advisor' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  // Asynchronous stdout: lines written while a write is in flight go out together, instead of one
  // blocking write(2) per line on the request path. server.ts flushes before exiting.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
}

export type { Logger };
