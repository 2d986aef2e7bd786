import type { Provider } from '../../catalogue.ts';
import { streamAnthropic } from './anthropic.ts';
import { streamGemini } from './gemini.ts';
import { streamOpenAiCompatible } from './openai-compatible.ts';
import { probeProviderKey, type ProviderProbeResult } from './probes.ts';
import { hasToolParts, withoutToolParts } from './tool-wire.ts';
import type { ChatRequest, ChatStream, UpstreamAgent } from './types.ts';

export type {
  ChatEvent,
  ChatImage,
  ChatMessage,
  FinishReason,
  ImageFormat,
  RoundUsage,
  ToolCallPart,
  ToolResultPart,
  ToolSpec,
  UpstreamAgent,
} from './types.ts';
export type { ProviderProbeResult } from './probes.ts';
export { createUpstreamAgent } from './upstream.ts';
export { argumentsObject, jsonObject } from './tool-wire.ts';
export { ProviderError, type ProviderErrorCode } from './types.ts';

/** The language-model providers as the service uses them, each through its own wire protocol. */
export interface Llm {
  /** One streamed chat round with `provider` on the user's own key. */
  stream(provider: Provider, apiKey: string, req: ChatRequest): ChatStream;
  /** Spec 4.2: verifies a key with the provider's model listing, within the probe timeout. */
  probe(provider: Provider, apiKey: string): Promise<ProviderProbeResult>;
}

export interface LlmOptions {
  /** Where each provider is reached (with its version segment). */
  readonly baseUrls: Readonly<Record<Provider, string>>;
  /** No byte from upstream for this long → UPSTREAM_TIMEOUT. */
  readonly idleTimeoutMs: number;
  readonly probeTimeoutMs: number;
  /** The process's pooled keep-alive connections. */
  readonly agent: UpstreamAgent;
}

export function createLlm(opts: LlmOptions): Llm {
  return {
    stream(provider, apiKey, request) {
      // A round without tools carries earlier tool parts as text (see withoutToolParts).
      const req = (request.tools?.length ?? 0) === 0 && hasToolParts(request.messages) ? { ...request, messages: withoutToolParts(request.messages) } : request;
      const target = { agent: opts.agent, baseUrl: opts.baseUrls[provider], apiKey, idleTimeoutMs: opts.idleTimeoutMs };
      switch (provider) {
        case 'anthropic':
          return streamAnthropic(target, req);
        case 'google':
          return streamGemini(target, req);
        default:
          return streamOpenAiCompatible(provider, target, req);
      }
    },
    probe: (provider, apiKey) =>
      probeProviderKey(provider, apiKey, { baseUrl: opts.baseUrls[provider], timeoutMs: opts.probeTimeoutMs, dispatcher: opts.agent }),
  };
}
