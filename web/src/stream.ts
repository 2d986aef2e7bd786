// A reply as frames (DESIGN §7, §11, §12): sent with the message (fetch POST, read as SSE) or attached to
// (`EventSource` on GET …/{id}/stream, which resumes after the last frame id by itself on reconnect).
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { authorizedFetch, errorOf } from './api/client.ts';
import type { Frame } from './reply.ts';
import { session } from './session.ts';

const FRAME_EVENTS = ['start', 'snapshot', 'delta', 'tool_call', 'tool_result', 'done', 'error'];

/**
 * Sends a message and reads its reply's frames as they come. Resolves when the stream ends (whether or
 * not a terminal frame came: a connection cut mid-reply resolves too, and the caller attaches to resume);
 * a refusal before the stream (4xx/5xx) rejects with its ApiError.
 */
export async function sendMessage(url: string, body: unknown, onFrame: (f: Frame) => void, signal: AbortSignal): Promise<void> {
  const response = await authorizedFetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok || !response.body) throw await errorOf(response);
  const events = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  const reader = events.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (value.event && FRAME_EVENTS.includes(value.event)) onFrame({ id: Number(value.id ?? 0), event: value.event, data: JSON.parse(value.data) });
    }
  } catch (err) {
    if (signal.aborted) return;
    // The connection broke mid-reply: the turn runs on for the detach grace; the caller resumes it.
    if (err instanceof TypeError) return;
    throw err;
  } finally {
    reader.releaseLock();
  }
}

/**
 * Attaches to a conversation's latest reply from `lastEventId` (0: from its start, or a snapshot). The
 * browser's EventSource reconnects by itself with Last-Event-ID; a 204 (nothing to resume) closes it.
 * Returns the function that detaches.
 */
export function attach(conversationId: string, lastEventId: number, onFrame: (f: Frame) => void, onClosed: () => void): () => void {
  const q = new URLSearchParams({ access_token: session()?.token ?? '' });
  if (lastEventId > 0) q.set('lastEventId', String(lastEventId));
  const source = new EventSource(`/api/advisor/conversations/${encodeURIComponent(conversationId)}/stream?${q}`);
  const close = () => {
    source.close();
    onClosed();
  };
  for (const event of FRAME_EVENTS) {
    source.addEventListener(event, (e) => {
      const m = e as MessageEvent<string>;
      onFrame({ id: Number(m.lastEventId || 0), event, data: JSON.parse(m.data) });
      if (event === 'done' || event === 'error') close();
    });
  }
  // CLOSED after an error: the server answered 204 or refused; CONNECTING: it retries by itself.
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) close();
  };
  return () => source.close();
}
