// The stream's frames (DESIGN §7) as the wire carries them: one JSON line each.
import type { FastifyReply } from 'fastify';
import { SseWriter } from '../../http/sse.ts';
import type { FinishReason, ProviderErrorCode } from '../../providers/llm/index.ts';
import type { MessageRow } from './repo.ts';

export type StreamErrorCode = ProviderErrorCode | 'SHUTTING_DOWN' | 'INTERNAL';

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

export const doneData = (finishReason: FinishReason | 'aborted', input: number, output: number): string =>
  `{"finishReason":"${finishReason}","usage":{"inputTokens":${input},"outputTokens":${output}}}`;

export const errorData = (code: string, retryable: boolean): string =>
  JSON.stringify({ code, message: MESSAGES[code as StreamErrorCode] ?? MESSAGES.INTERNAL, retryable });

/** An idempotent retry of a finished turn: the stored reply as one stream, same ids, nothing new. */
export function replayTurn(reply: FastifyReply, turn: TurnIds, stored: MessageRow): void {
  reply.hijack();
  const sse = new SseWriter(reply.raw);
  sse.open(reply.getHeaders());
  sse.event('start', startData(turn));
  if (stored.content.length > 0) sse.event('delta', deltaData(stored.content));
  if (stored.error_code !== null) {
    sse.event('error', errorData(stored.error_code, stored.error_retryable ?? true));
  } else {
    const reason = stored.status === 'complete' ? ((stored.finish_reason ?? 'stop') as FinishReason) : 'aborted';
    sse.event('done', doneData(reason, stored.input_tokens ?? 0, stored.output_tokens ?? 0));
  }
  sse.end();
}
