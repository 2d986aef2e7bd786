// A reply as frames (DESIGN §7, §11, §12): sent with the message (fetch POST, read as SSE) or attached to
// (`EventSource` on GET …/{id}/stream, which resumes after the last frame id by itself on reconnect).
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { authorizedFetch, errorOf, type Schemas } from './api/client.ts';
import { session } from './session.ts';

export type Part = Schemas['MessagePart'];
export type Usage = Schemas['Usage'];

export interface Reply {
  readonly assistantMessageId: string | undefined;
  readonly parts: readonly Part[];
  readonly status: 'streaming' | 'complete' | 'interrupted' | 'failed';
  readonly finishReason: string | null;
  readonly usage: Usage | null;
  readonly error: { code: string; message: string; retryable: boolean } | null;
  /** How the turn is paid: from its start frame while it runs, as stored (charged or returned) once it has ended. */
  readonly billing: (Schemas['StreamStartFrame']['billing'] & { readonly status?: NonNullable<Schemas['Message']['billing']>['status'] }) | null;
  /** Id of the last frame taken in: where a resume starts. */
  readonly lastEventId: number;
}

export interface Frame {
  readonly id: number;
  readonly event: string;
  readonly data: unknown;
}

export const EMPTY_REPLY: Reply = {
  assistantMessageId: undefined,
  parts: [],
  status: 'streaming',
  finishReason: null,
  usage: null,
  error: null,
  billing: null,
  lastEventId: 0,
};

/** One frame applied to a reply. Frames already taken in (a resume overlapping) change nothing. */
export function applyFrame(reply: Reply, frame: Frame): Reply {
  if (frame.id <= reply.lastEventId && frame.event !== 'snapshot') return reply;
  const next = { ...reply, lastEventId: Math.max(reply.lastEventId, frame.id) };
  switch (frame.event) {
    case 'start': {
      const d = frame.data as Schemas['StreamStartFrame'];
      return { ...next, assistantMessageId: d.assistantMessageId, billing: d.billing };
    }
    case 'snapshot': {
      const d = frame.data as Schemas['StreamSnapshotFrame'];
      return { ...next, assistantMessageId: d.assistantMessageId, parts: d.parts, status: d.status, usage: d.usage ?? null };
    }
    case 'delta': {
      const { text } = frame.data as Schemas['StreamDeltaFrame'];
      const last = reply.parts.at(-1);
      const parts =
        last?.type === 'text'
          ? [...reply.parts.slice(0, -1), { type: 'text' as const, text: last.text + text }]
          : [...reply.parts, { type: 'text' as const, text }];
      return { ...next, parts };
    }
    case 'tool_call':
      return { ...next, parts: [...reply.parts, { type: 'tool_call', ...(frame.data as Schemas['StreamToolCallFrame']) }] };
    case 'tool_result':
      return { ...next, parts: [...reply.parts, { type: 'tool_result', ...(frame.data as Schemas['StreamToolResultFrame']) } as Part] };
    case 'done': {
      const d = frame.data as Schemas['StreamDoneFrame'];
      const status = d.finishReason === 'stopped' || d.finishReason === 'aborted' ? 'interrupted' : 'complete';
      return { ...next, status, finishReason: d.finishReason, usage: d.usage };
    }
    case 'error':
      return { ...next, status: 'failed', error: frame.data as Schemas['StreamErrorFrame'] };
    default:
      return next;
  }
}

export const ended = (r: Reply): boolean => r.status !== 'streaming';

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

/** A reply stored with its conversation, as a Reply (for display and resume). */
export function replyOf(m: Schemas['Message']): Reply {
  return {
    ...EMPTY_REPLY,
    assistantMessageId: m.id,
    parts: m.parts.length > 0 ? m.parts : m.text ? [{ type: 'text', text: m.text }] : [],
    status: m.status,
    finishReason: m.finishReason,
    usage: m.usage,
    error: m.error ? { ...m.error, message: '' } : null,
    billing: m.billing,
  };
}
