import type { Dispatcher } from 'undici';

export type ImageFormat = 'png' | 'jpeg' | 'webp';

export interface ChatImage {
  readonly format: ImageFormat;
  readonly data: Buffer;
}

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly text: string;
  readonly images?: readonly ChatImage[];
}

/** Provider-neutral request; each wire protocol maps it to its own body. */
export interface ChatRequest {
  readonly model: string;
  readonly system?: string;
  readonly messages: readonly ChatMessage[];
  readonly maxTokens: number;
  /** Aborting it cancels the upstream call at once (client gone, shutdown). */
  readonly signal: AbortSignal;
}

export type FinishReason = 'stop' | 'length' | 'content_filter';

export type ChatEvent =
  | { readonly type: 'delta'; readonly text: string }
  /** Token counts so far; a later one replaces an earlier one. */
  | { readonly type: 'usage'; readonly input: number; readonly output: number }
  /** Always the last event of a stream that ended normally. */
  | { readonly type: 'finish'; readonly reason: FinishReason };

export type ProviderErrorCode = 'PROVIDER_AUTH_FAILED' | 'PROVIDER_RATE_LIMITED' | 'PROVIDER_UNAVAILABLE' | 'PROVIDER_ERROR' | 'UPSTREAM_TIMEOUT';

/**
 * A failure of the upstream call, already mapped. `detail` is for logs only: it never contains the
 * key or the provider's error text (which can echo part of the key).
 */
export class ProviderError extends Error {
  readonly code: ProviderErrorCode;
  readonly retryable: boolean;
  readonly status: number | undefined;
  readonly detail: string;

  constructor(code: ProviderErrorCode, retryable: boolean, detail: string, status?: number) {
    super(`${code}: ${detail}`);
    this.name = 'ProviderError';
    this.code = code;
    this.retryable = retryable;
    this.detail = detail;
    this.status = status;
  }
}

/** Keep-alive connections to the providers: one per process (see createUpstreamAgent), closed on shutdown. */
export type UpstreamAgent = Dispatcher;

/** Where and as whom to call a provider. */
export interface ChatTarget {
  /** The connection pool the call goes through. */
  readonly agent: UpstreamAgent;
  readonly baseUrl: string;
  readonly apiKey: string;
  /** No byte from upstream for this long (headers included) → UPSTREAM_TIMEOUT. */
  readonly idleTimeoutMs: number;
}

/**
 * The events of one streamed turn, in batches: one batch per chunk read from the provider (the
 * events it completed, in order, never none), so a consumer handles them without a wait each.
 */
export type ChatStream = AsyncIterable<readonly ChatEvent[]>;
