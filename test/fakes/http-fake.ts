// Shared base for loopback fakes of outside systems. Every fake listens on 127.0.0.1:0, records
// every request, and can be closed without waiting for stalled or streaming responses.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';

export type ProbeBehaviour = 'ok' | 'unauthorized' | 'forbidden' | 'bad-key-400' | 'rate-limited' | 'server-error' | 'stall';

export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. `/v1/models`. */
  path: string;
  query: Record<string, string>;
  /** Lower-case header names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: string;
  /** Parsed body when it was valid JSON. */
  json?: unknown;
  receivedAt: number;
}

export type FakeHandler = (req: RecordedRequest, res: ServerResponse, raw: IncomingMessage) => void | Promise<void>;

export interface FakeServer {
  /** Origin, e.g. `http://127.0.0.1:43121` (no trailing slash). */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** Aborted when close() starts, so scripted delays and streams stop at once. */
  signal: AbortSignal;
  close(): Promise<void>;
}

export async function startFake(handler: FakeHandler): Promise<FakeServer> {
  const requests: RecordedRequest[] = [];
  const lifetime = new AbortController();
  const server = createServer((raw, res) => {
    const chunks: Buffer[] = [];
    raw.on('data', (c: Buffer) => chunks.push(c));
    raw.on('end', () => {
      const recorded = record(raw, Buffer.concat(chunks).toString('utf8'));
      requests.push(recorded);
      Promise.resolve()
        .then(() => handler(recorded, res, raw))
        .catch((err: unknown) => {
          // A fake that throws is a bug in the fake or the test; answer loudly rather than hang.
          if (!res.headersSent) sendJson(res, 500, { fakeError: String(err) });
          else res.destroy();
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    signal: lifetime.signal,
    close() {
      closing ??= new Promise<void>((resolve) => {
        lifetime.abort();
        // Stalled and streaming responses keep sockets busy; destroy them so tests never hang.
        server.closeAllConnections();
        server.close(() => resolve());
      });
      return closing;
    },
  };
}

function record(raw: IncomingMessage, body: string): RecordedRequest {
  const u = new URL(raw.url ?? '/', 'http://fake.local');
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw.headers)) {
    if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  const recorded: RecordedRequest = {
    method: raw.method ?? 'GET',
    path: u.pathname,
    query: Object.fromEntries(u.searchParams),
    headers,
    body,
    receivedAt: Date.now(),
  };
  if (body.length > 0) {
    try {
      recorded.json = JSON.parse(body) as unknown;
    } catch {
      // Not JSON (e.g. Stripe's form encoding); the raw body is still recorded.
    }
  }
  return recorded;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Status a probe behaviour maps to; undefined for 'ok' and 'stall'. */
export function probeStatus(b: ProbeBehaviour, serverError = 500): number | undefined {
  switch (b) {
    case 'unauthorized':
      return 401;
    case 'forbidden':
      return 403;
    case 'bad-key-400':
      return 400;
    case 'rate-limited':
      return 429;
    case 'server-error':
      return serverError;
    default:
      return undefined;
  }
}

export function bearer(req: RecordedRequest): string | undefined {
  const h = req.headers['authorization'];
  const m = h === undefined ? null : /^Bearer\s+(.+)$/i.exec(h);
  return m?.[1]?.trim();
}

export function randomId(prefix: string, bytes = 12): string {
  return `${prefix}${randomBytes(bytes).toString('hex')}`;
}

/** Providers echo a key back with most of it hidden; mimic the shape, never the whole key. */
export function maskKey(key: string, head = 3, tail = 4): string {
  if (key.length <= head + tail) return '***';
  return `${key.slice(0, head)}***${key.slice(-tail)}`;
}

/** Sleep that ends early (without throwing) when the signal aborts. */
export async function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return;
  try {
    await delay(ms, undefined, { signal });
  } catch {
    // Aborted: the caller checks the response state next.
  }
}

/** A set of valid keys with a default, shared by every key-probing fake. */
export interface KeyRing {
  validKey: string;
  isValid(key: string | undefined): boolean;
  addValidKey(key: string): void;
  removeValidKey(key: string): void;
}

export function keyRing(defaultKey: string): KeyRing {
  const keys = new Set([defaultKey]);
  return {
    validKey: defaultKey,
    isValid: (k) => k !== undefined && keys.has(k),
    addValidKey: (k) => void keys.add(k),
    removeValidKey: (k) => void keys.delete(k),
  };
}

export function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
} as const;
