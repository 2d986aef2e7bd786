import { MIME, base64, incomplete, inStreamError, streamSse, type Translator } from './upstream.ts';
import type { ChatEvent, ChatMessage, ChatRequest, ChatStream, ChatTarget, FinishReason } from './types.ts';

export const ANTHROPIC_VERSION = '2023-06-01';

const FINISH: Record<string, FinishReason> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_use: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  refusal: 'content_filter',
};

interface AnthropicUsage {
  input_tokens?: unknown;
  output_tokens?: unknown;
  cache_creation_input_tokens?: unknown;
  cache_read_input_tokens?: unknown;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
/** Cached prompt tokens are reported apart from `input_tokens`; the prompt is all of them. */
const inputOf = (u: AnthropicUsage): number => num(u.input_tokens) + num(u.cache_creation_input_tokens) + num(u.cache_read_input_tokens);

function content(m: ChatMessage): unknown {
  if (!m.images || m.images.length === 0) return m.text;
  // Images before the text, as Anthropic recommends.
  return [
    ...m.images.map((i) => ({ type: 'image', source: { type: 'base64', media_type: MIME[i.format], data: base64(i.data) } })),
    { type: 'text', text: m.text },
  ];
}

export function requestBody(req: ChatRequest): string {
  return JSON.stringify({
    model: req.model,
    max_tokens: req.maxTokens,
    ...(req.system ? { system: req.system } : {}),
    messages: req.messages.map((m) => ({ role: m.role, content: content(m) })),
    stream: true,
  });
}

class AnthropicTranslator implements Translator {
  ended = false;
  #reason: FinishReason | undefined;
  #input = -1;
  #output = 0;

  event(name: string, data: string, out: ChatEvent[]): void {
    // Only the events that carry something are parsed; ping and block boundaries are skipped unread.
    switch (name) {
      case 'content_block_delta': {
        const e = JSON.parse(data) as { delta?: { type?: unknown; text?: unknown } };
        const text = e.delta?.text;
        if (e.delta?.type === 'text_delta' && typeof text === 'string' && text.length > 0) out.push({ type: 'delta', text });
        return;
      }
      case 'message_start': {
        const e = JSON.parse(data) as { message?: { usage?: AnthropicUsage } };
        const usage = e.message?.usage;
        if (usage) {
          this.#input = inputOf(usage);
          this.#output = num(usage.output_tokens);
        }
        return;
      }
      case 'message_delta': {
        const e = JSON.parse(data) as { delta?: { stop_reason?: unknown }; usage?: AnthropicUsage };
        const stop = e.delta?.stop_reason;
        if (typeof stop === 'string') this.#reason = FINISH[stop] ?? 'stop';
        // output_tokens here is cumulative; input_tokens appears here too in newer API versions.
        if (e.usage) {
          if (typeof e.usage.output_tokens === 'number') this.#output = e.usage.output_tokens;
          if (typeof e.usage.input_tokens === 'number') this.#input = inputOf(e.usage);
        }
        return;
      }
      case 'message_stop':
        this.ended = true;
        this.#close(out, this.#reason ?? 'stop');
        return;
      case 'error': {
        const e = JSON.parse(data) as { error?: unknown };
        throw inStreamError('anthropic', e.error);
      }
      default:
        return;
    }
  }

  end(out: ChatEvent[]): void {
    if (this.#reason === undefined) throw incomplete('anthropic');
    this.#close(out, this.#reason);
  }

  #close(out: ChatEvent[], reason: FinishReason): void {
    if (this.#input >= 0) out.push({ type: 'usage', input: this.#input, output: this.#output });
    out.push({ type: 'finish', reason });
  }
}

/** Anthropic Messages API: `POST {base}/messages`, named SSE events message_start … message_stop. */
export function streamAnthropic(target: ChatTarget, req: ChatRequest): ChatStream {
  const call = {
    provider: 'anthropic',
    url: `${target.baseUrl}/messages`,
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-api-key': target.apiKey,
      'anthropic-version': ANTHROPIC_VERSION,
    },
  };
  return streamSse(call, requestBody(req), target, req.signal, new AnthropicTranslator());
}
