import { pino, type DestinationStream, type Logger } from 'pino';

/** Everything that may carry a secret is redacted wherever it appears in a log line. */
export const REDACT_PATHS = [
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
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
