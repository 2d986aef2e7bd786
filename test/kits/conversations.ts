// Shared by the conversation tests (and the cluster and web suites): reading SSE bodies, saving keys like a user, counting rows,
// watching billing, and a real HTTP client for disconnects.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { sql } from 'kysely';
import type { Provider } from '../../src/catalogue.ts';
import { buildTestApp, type TestApp } from '../helpers/app.ts';
import { startOpenAiCompatibleFake, type OpenAiCompatibleFake } from '../fakes/index.ts';
import type { TurnBilling, TurnCharge, TurnRequest } from '../../src/features/billing/turn-billing.ts';

export interface Frame {
  id: number | undefined;
  event: string;
  data: Record<string, unknown>;
}

/** Frames and ping comments of a complete text/event-stream body. */
export function parseFrames(body: string): { frames: Frame[]; pings: number } {
  const frames: Frame[] = [];
  let pings = 0;
  for (const block of body.split('\n\n')) {
    if (block.trim() === '') continue;
    let id: number | undefined;
    let event = 'message';
    let data = '';
    for (const line of block.split('\n')) {
      if (line === ': ping') pings++;
      else if (line.startsWith('id: ')) id = Number(line.slice(4));
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data = line.slice(6);
    }
    if (data !== '') frames.push({ id, event, data: JSON.parse(data) as Record<string, unknown> });
  }
  return { frames, pings };
}

export const newUser = (tag = 'u'): string => `${tag}-${randomUUID()}`;

export async function saveKey(t: TestApp, user: string, provider: Provider, apiKey: string, defaultModel?: string): Promise<void> {
  const res = await t.call('PUT', `/api/advisor/provider-keys/${provider}`, { user, body: { apiKey, ...(defaultModel ? { defaultModel } : {}) } });
  assert.equal(res.statusCode, 200, res.body);
}

/** A new user (`newUser(tag)`) with an OpenAI key saved and active. */
export async function userWithOpenAiKey(t: TestApp, apiKey: string, tag: string): Promise<string> {
  const user = newUser(tag);
  await saveKey(t, user, 'openai', apiKey);
  return user;
}

export function message(text = 'How did my last trade go?', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { text, clientMessageId: randomUUID(), ...extra };
}

export interface StreamResult {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
  frames: Frame[];
  pings: number;
  code: string | undefined;
}

/** POSTs a message to a new (`null`) or existing conversation through inject; waits for the whole stream. */
export async function send(t: TestApp, user: string, conversationId: string | null, body: unknown): Promise<StreamResult> {
  const url = `/api/advisor/conversations/${conversationId ?? 'new'}/messages/stream`;
  const res = await t.call('POST', url, { user, body, headers: { 'content-type': 'application/json' } });
  const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
  const parsed = sse ? parseFrames(res.body) : { frames: [], pings: 0 };
  const code = sse ? undefined : res.json<{ error?: { code?: string } }>().error?.code;
  return { statusCode: res.statusCode, headers: res.headers, body: res.body, ...parsed, code };
}

export const startOf = (r: StreamResult): Record<string, unknown> => r.frames[0]?.data ?? {};
export const textOf = (r: StreamResult): string =>
  r.frames
    .filter((f) => f.event === 'delta')
    .map((f) => String(f.data['text']))
    .join('');

export async function countRows(t: TestApp): Promise<{ conversations: number; messages: number; attachments: number }> {
  const count = async (table: 'conversations' | 'messages' | 'attachments'): Promise<number> => {
    const r = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)}`.execute(t.deps.db);
    return r.rows[0]?.n ?? 0;
  };
  return { conversations: await count('conversations'), messages: await count('messages'), attachments: await count('attachments') };
}

export interface BillingSpy {
  /** The reservations made (a turn's provider and model are absent when its start statement chose them). */
  reserves: Omit<TurnRequest, 'provider' | 'model'>[];
  settles: { charge: TurnCharge; produced: boolean }[];
  /** For the test app's `deps.billing` override: the app's real billing, recorded. */
  wrap(real: TurnBilling): TurnBilling;
}

/** Records every reserve and settle while delegating to the app's real billing (install with `deps: { billing: spy.wrap }`). */
export function billingSpy(): BillingSpy {
  const spy: BillingSpy = {
    reserves: [],
    settles: [],
    wrap: (real) => ({
      async reserve(req, store) {
        spy.reserves.push(req);
        return real.reserve(req, store);
      },
      async reserveWithin(req, store) {
        const reserved = await real.reserveWithin(req, store);
        // Only what was reserved: a statement that refused the turn reserved nothing.
        if (reserved.charge !== undefined) spy.reserves.push(req);
        return reserved;
      },
      async settle(charge, produced, store) {
        spy.settles.push({ charge, produced });
        return real.settle(charge, produced, store);
      },
    }),
  };
  return spy;
}

export async function replyRow(t: TestApp, id: string) {
  return t.deps.db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Polls until `probe` has a value. The bound only turns a hang into a failure: far above anything a busy machine adds. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Tiny images with the right magic numbers. */
export const IMAGES = {
  png: Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(24, 1)]),
  jpeg: Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(24, 2)]),
  webp: Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBP'), Buffer.alloc(16, 3)]),
};

export const image = (format: keyof typeof IMAGES, data: Buffer = IMAGES[format]) => ({ type: 'image', format, dataBase64: data.toString('base64') });

/** A streaming request over a real socket: frames as they arrive, and the socket to cut. */
export interface LiveStream {
  status: Promise<number>;
  frames: Frame[];
  /** Resolves once `n` delta frames arrived; returns their texts. */
  deltas(n: number): Promise<string[]>;
  /** Resolves when the response ended (or the socket closed). */
  ended: Promise<void>;
  destroy(): void;
}

export function openStream(
  baseUrl: string,
  token: string,
  body: unknown,
  conversationId: string | null = null,
  extraHeaders: Record<string, string> = {},
): LiveStream {
  const payload = JSON.stringify(body);
  return openSse(`${baseUrl}/api/advisor/conversations/${conversationId ?? 'new'}/messages/stream`, {
    method: 'POST',
    headers: { ...extraHeaders, authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) },
    body: payload,
  });
}

/** DESIGN §12: GET …/{id}/stream over a real socket, resuming after `lastEventId` (a header, or the query when `via` says so). */
export function attachStream(
  baseUrl: string,
  token: string,
  conversationId: string,
  lastEventId?: number,
  via: 'header' | 'query' = 'header',
  extraHeaders: Record<string, string> = {},
): LiveStream {
  const query = lastEventId !== undefined && via === 'query' ? `?lastEventId=${lastEventId}` : '';
  const headers: Record<string, string> = { ...extraHeaders, authorization: `Bearer ${token}` };
  if (lastEventId !== undefined && via === 'header') headers['last-event-id'] = String(lastEventId);
  return openSse(`${baseUrl}/api/advisor/conversations/${conversationId}/stream${query}`, { method: 'GET', headers });
}

function openSse(url: string, opts: { method: string; headers: Record<string, string>; body?: string }): LiveStream {
  const frames: Frame[] = [];
  const texts = (): string[] => frames.filter((f) => f.event === 'delta').map((f) => String(f.data['text']));
  const waiters: { n: number; resolve: (v: string[]) => void }[] = [];
  let buffer = '';
  let resolveStatus: (s: number) => void = () => undefined;
  let resolveEnded: () => void = () => undefined;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const ended = new Promise<void>((r) => (resolveEnded = r));
  const req = http.request(url, { method: opts.method, headers: opts.headers });
  req.on('response', (res) => {
    resolveStatus(res.statusCode ?? 0);
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffer += chunk;
      const end = buffer.lastIndexOf('\n\n');
      if (end < 0) return;
      frames.push(...parseFrames(buffer.slice(0, end + 2)).frames);
      buffer = buffer.slice(end + 2);
      const have = texts();
      for (const w of waiters.filter((x) => have.length >= x.n)) w.resolve(have.slice(0, w.n));
    });
    res.on('end', resolveEnded);
    res.on('close', resolveEnded);
    res.on('error', () => undefined);
  });
  req.on('error', () => resolveEnded());
  req.end(opts.body);
  return {
    status,
    frames,
    ended,
    deltas: (n) => {
      const have = texts();
      return have.length >= n ? Promise.resolve(have.slice(0, n)) : new Promise((resolve) => waiters.push({ n, resolve }));
    },
    destroy: () => req.destroy(),
  };
}

/** A test app on a fresh database whose OpenAI calls go to an OpenAI-compatible fake, and how to close both. */
export async function appOnOpenAiFake(): Promise<{ t: TestApp; fake: OpenAiCompatibleFake; close: () => Promise<void> }> {
  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  const t = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url } });
  return { t, fake, close: async () => (await t.close(), await fake.close()) };
}
