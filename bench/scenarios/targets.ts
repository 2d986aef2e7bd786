// The two sides of the stream rows: the service's stream route and the bare proxy, asked the same
// question (one user message) against the same fake upstream.
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { DEFAULT_MODEL } from '../lib/seed.ts';
import { OPENAI_MARKERS, SERVICE_MARKERS, openStream, type OpenStream, type StreamRequest } from '../lib/sse-client.ts';

export const QUESTION = 'I closed my ES long at the open after a gap down; was that a process mistake or a reasonable exit?';

/** Longer than any stream of the bench runs (the scale row holds its streams open for a few minutes). */
const STREAM_TIMEOUT_MS = 15 * 60_000;

/** A turn on a new conversation; `onChunk` sees the body's chunks as they arrive. */
export function serviceStream(serviceUrl: string, token: string, agent: http.Agent, onChunk?: StreamRequest['onChunk']): OpenStream {
  return openStream({
    url: new URL('/api/advisor/conversations/new/messages/stream', serviceUrl),
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify({ text: QUESTION, clientMessageId: randomUUID() }),
    agent,
    markers: SERVICE_MARKERS,
    timeoutMs: STREAM_TIMEOUT_MS,
    onChunk,
  });
}

const proxyBody = JSON.stringify({
  model: DEFAULT_MODEL,
  messages: [{ role: 'user', content: QUESTION }],
  stream: true,
  stream_options: { include_usage: true },
});

export function proxyStream(proxyUrl: string, agent: http.Agent): OpenStream {
  return openStream({ url: new URL('/', proxyUrl), headers: {}, body: proxyBody, agent, markers: OPENAI_MARKERS, timeoutMs: STREAM_TIMEOUT_MS });
}

/** Rounds of `users` for the per-user limits: user i of n. */
export function userIds(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
}
