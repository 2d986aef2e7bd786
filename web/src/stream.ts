// A reply as frames (DESIGN §7, §11, §12): sent with the message (fetch POST, read as SSE) or attached to
// (fetch GET …/{id}/stream, resumed after the last frame id on reconnect). The token goes in the
// Authorization header of both, never in a URL (issue 41 item 8).
import { authorizedFetch, errorOf } from './api/client.ts';
import { followStream, readFrames } from './event-stream.ts';
import type { Frame } from './reply.ts';

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
  // A cut mid-reply resolves: the turn runs on for the detach grace, and the caller resumes it.
  try {
    await readFrames(response.body, onFrame);
  } catch (err) {
    if (!signal.aborted) throw err;
  }
}

/**
 * Attaches to a conversation's latest reply from `lastEventId` (0: from its start, or a snapshot), with
 * `Authorization` and `Last-Event-ID` headers, reconnecting after a cut from the last frame taken in,
 * until the reply ends, the service answers 204 (nothing to resume) or refuses. Then `onClosed`.
 * Returns the function that detaches (without `onClosed`).
 */
export function attach(conversationId: string, lastEventId: number, onFrame: (f: Frame) => void, onClosed: () => void): () => void {
  const controller = new AbortController();
  const url = `/api/advisor/conversations/${encodeURIComponent(conversationId)}/stream`;
  const closed = () => {
    if (!controller.signal.aborted) onClosed();
  };
  followStream({
    open: (headers, signal) => authorizedFetch(url, { headers: { accept: 'text/event-stream', ...headers }, cache: 'no-store', signal }),
    lastEventId,
    onFrame,
    signal: controller.signal,
  }).then(closed, closed);
  return () => controller.abort();
}
