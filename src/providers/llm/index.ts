import type { Provider } from '../../catalogue.ts';
import { streamAnthropic } from './anthropic.ts';
import { streamGemini } from './gemini.ts';
import { streamOpenAiCompatible } from './openai-compatible.ts';
import type { ChatRequest, ChatStream, ChatTarget } from './types.ts';

export type { ChatEvent, ChatImage, ChatMessage, ChatRequest, ChatStream, ChatTarget, FinishReason, ImageFormat, UpstreamAgent } from './types.ts';
export { createUpstreamAgent } from './upstream.ts';
export { ProviderError, type ProviderErrorCode } from './types.ts';

/** One streamed chat turn with `provider`, through its own wire protocol. */
export function streamChat(provider: Provider, target: ChatTarget, req: ChatRequest): ChatStream {
  switch (provider) {
    case 'anthropic':
      return streamAnthropic(target, req);
    case 'google':
      return streamGemini(target, req);
    default:
      return streamOpenAiCompatible(provider, target, req);
  }
}
