// A reply as the page holds it while it streams and once stored (DESIGN §7, §11): frames folded into it
// one by one. No DOM and no fetch (unit-tested under node); stream.ts reads the frames.
import type { Schemas } from './api/client.ts';
import type { Grounding } from './grounding.ts';

export type Part = Schemas['MessagePart'];
type Usage = Schemas['Usage'];

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
  /** Its figures checked against the turn's data (DESIGN §18), once it has ended; none for a reply stored before the check. */
  readonly grounding: Grounding | null;
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
  grounding: null,
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
      return { ...next, assistantMessageId: d.assistantMessageId, parts: d.parts, status: d.status, usage: d.usage ?? null, grounding: d.grounding ?? null };
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
      return { ...next, status, finishReason: d.finishReason, usage: d.usage, grounding: d.grounding ?? null };
    }
    case 'error':
      return { ...next, status: 'failed', error: frame.data as Schemas['StreamErrorFrame'] };
    default:
      return next;
  }
}

export const ended = (r: Reply): boolean => r.status !== 'streaming';

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
    grounding: m.grounding ?? null,
  };
}
