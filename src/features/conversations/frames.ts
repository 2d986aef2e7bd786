// The stream's frames (DESIGN §7) as the wire carries them: one JSON line each.
import type { FastifyReply } from 'fastify';
import { SseWriter } from '../../http/sse.ts';
import { argumentsObject, type FinishReason, type ProviderErrorCode, type ToolCallPart } from '../../providers/llm/index.ts';
import { ranTool, type ToolOutcome } from '../advisor-tools/toolbox.ts';
import { usageDto, type Receipt } from '../usage/receipt.ts';
import { groundingAsBuilt, type Grounding } from './grounding.ts';
import { apiParts, type ApiPart } from './parts.ts';
import type { MessageRow } from './repo.ts';

export type StreamErrorCode = ProviderErrorCode | 'SHUTTING_DOWN' | 'STREAM_IN_PROGRESS' | 'INTERNAL';

/** What the start frame tells the client: where the turn is stored and how it is paid. */
export interface TurnIds {
  readonly conversationId: string;
  readonly userMessageId: string;
  readonly assistantMessageId: string;
  readonly provider: string;
  readonly model: string;
  readonly billing: { readonly source: string; readonly credits: number };
}

/** Fixed texts: a provider's own error text can echo part of the key, so it is never forwarded. */
const MESSAGES: Record<StreamErrorCode, string> = {
  PROVIDER_AUTH_FAILED: 'The provider rejected the API key; save a valid key',
  PROVIDER_RATE_LIMITED: 'The provider is rate limiting this key; try again shortly',
  PROVIDER_UNAVAILABLE: 'The provider is unavailable or the connection to it was lost',
  PROVIDER_ERROR: 'The provider could not process this request',
  UPSTREAM_TIMEOUT: 'The provider sent nothing for too long',
  SHUTTING_DOWN: 'The service is restarting; send the message again with a new clientMessageId',
  STREAM_IN_PROGRESS: 'Another reply of this user is streaming now; this one was ended',
  INTERNAL: 'Internal error',
};

export function startData(t: TurnIds): string {
  return JSON.stringify({
    conversationId: t.conversationId,
    userMessageId: t.userMessageId,
    assistantMessageId: t.assistantMessageId,
    provider: t.provider,
    model: t.model,
    billing: { source: t.billing.source, credits: t.billing.credits },
  });
}

export const deltaData = (text: string): string => `{"text":${JSON.stringify(text)}}`;

/** `grounding` (DESIGN §18) is left out only for a reply stored before the check existed. */
export function doneData(finishReason: FinishReason | 'aborted' | 'stopped', receipt: Receipt, toolCalls: number, grounding: Grounding | undefined): string {
  return JSON.stringify({ finishReason, usage: usageDto(receipt), toolCalls, ...(grounding ? { grounding } : {}) });
}

export const toolCallData = (call: ToolCallPart): string => JSON.stringify({ id: call.id, name: call.name, arguments: argumentsObject(call.arguments) });

export const toolResultData = (call: { readonly id: string; readonly name: string }, body: ToolOutcome<string>): string =>
  JSON.stringify(body.ok ? { id: call.id, name: call.name, ok: true, result: body.result } : { id: call.id, name: call.name, ok: false, error: body.error });

export const errorData = (code: string, retryable: boolean): string =>
  JSON.stringify({ code, message: MESSAGES[code as StreamErrorCode] ?? MESSAGES.INTERNAL, retryable });

/** An idempotent retry of a finished turn: the stored reply as one stream (its text, tool calls and results), same ids, nothing new. */
export function replayTurn(reply: FastifyReply, turn: TurnIds, stored: MessageRow): void {
  reply.hijack();
  const sse = new SseWriter(reply.raw);
  sse.open(reply.getHeaders());
  sse.event('start', startData(turn));
  const parts = apiParts(stored.parts, stored.content);
  for (const part of parts) {
    if (part.type === 'text') sse.event('delta', deltaData(part.text));
    else if (part.type === 'tool_call') sse.event('tool_call', JSON.stringify({ id: part.id, name: part.name, arguments: part.arguments }));
    else sse.event('tool_result', toolResultData(part, part));
  }
  const end = storedTerminal(stored, toolCallsOf(parts));
  sse.event(end.event, end.data);
  sse.end();
}

/** The terminal frame (event and data) of a stored reply that has ended. */
export function storedTerminal(stored: MessageRow, toolCalls = toolCallsOf(apiParts(stored.parts, stored.content))): { event: 'done' | 'error'; data: string } {
  if (stored.error_code !== null) return { event: 'error', data: errorData(stored.error_code, stored.error_retryable ?? true) };
  const reason = stored.status === 'complete' ? ((stored.finish_reason ?? 'stop') as FinishReason) : stored.finish_reason === 'stopped' ? 'stopped' : 'aborted';
  return { event: 'done', data: doneData(reason, storedReceipt(stored), toolCalls, storedGrounding(stored)) };
}

/** Tool calls a reply ran (those refused over the cap are not counted, DESIGN §11). */
function toolCallsOf(parts: readonly ApiPart[]): number {
  return parts.filter((p) => p.type === 'tool_result' && ranTool(p)).length;
}

/** A stored reply's grounding (DESIGN §18), as the turn built it; undefined for one stored without it. */
export const storedGrounding = (stored: Pick<MessageRow, 'grounding'>): Grounding | undefined =>
  stored.grounding ? groundingAsBuilt(stored.grounding as Grounding) : undefined;

/**
 * DESIGN §12: the state of a reply so far, for a client whose Last-Event-ID the log no longer holds;
 * an ended reply's with its grounding (DESIGN §18).
 */
export function snapshotData(
  assistantMessageId: string,
  status: string,
  text: string,
  parts: readonly ApiPart[],
  receipt: Receipt | undefined,
  grounding?: Grounding,
): string {
  return JSON.stringify({ assistantMessageId, status, text, parts, ...(receipt ? { usage: usageDto(receipt) } : {}), ...(grounding ? { grounding } : {}) });
}

/** A stored reply's receipt (DESIGN §13). */
export function storedReceipt(row: Pick<MessageRow, 'input_tokens' | 'output_tokens' | 'cached_input_tokens' | 'reasoning_tokens' | 'cost_micros'>): Receipt {
  return {
    input: row.input_tokens,
    output: row.output_tokens,
    cachedInput: row.cached_input_tokens,
    reasoning: row.reasoning_tokens,
    costMicros: row.cost_micros,
  };
}
