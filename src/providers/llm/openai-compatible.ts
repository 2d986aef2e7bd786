import { MIME, base64, incomplete, inStreamError, streamSse, type Translator } from './upstream.ts';
import type { ChatEvent, ChatMessage, ChatRequest, ChatStream, ChatTarget, FinishReason } from './types.ts';

export type OpenAiFlavor = 'openai' | 'mistral' | 'xai' | 'groq' | 'deepseek' | 'openrouter';

interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
}

interface Chunk {
  choices?: { delta?: { content?: unknown }; finish_reason?: unknown }[];
  usage?: Usage | null;
  /** Groq's older place for usage on the last chunk. */
  x_groq?: { usage?: Usage | null };
  error?: unknown;
}

/**
 * Mistral validates bodies strictly and rejects `stream_options` (it reports usage on the finishing
 * chunk anyway); every other flavour sends a separate usage chunk (`choices: []`) only when asked.
 */
const ASKS_USAGE: Record<OpenAiFlavor, boolean> = { openai: true, mistral: false, xai: true, groq: true, deepseek: true, openrouter: true };
/** OpenAI's reasoning models refuse `max_tokens`; Groq deprecated it. The others know only `max_tokens`. */
const MAX_FIELD: Record<OpenAiFlavor, string> = {
  openai: 'max_completion_tokens',
  groq: 'max_completion_tokens',
  mistral: 'max_tokens',
  xai: 'max_tokens',
  deepseek: 'max_tokens',
  openrouter: 'max_tokens',
};

const FINISH: Record<string, FinishReason> = { stop: 'stop', length: 'length', content_filter: 'content_filter' };

function content(m: ChatMessage): unknown {
  if (!m.images || m.images.length === 0) return m.text;
  return [
    { type: 'text', text: m.text },
    ...m.images.map((i) => ({ type: 'image_url', image_url: { url: `data:${MIME[i.format]};base64,${base64(i.data)}` } })),
  ];
}

export function requestBody(flavor: OpenAiFlavor, req: ChatRequest): string {
  const messages: unknown[] = [];
  if (req.system) messages.push({ role: 'system', content: req.system });
  for (const m of req.messages) messages.push({ role: m.role, content: content(m) });
  const body: Record<string, unknown> = { model: req.model, messages, stream: true, [MAX_FIELD[flavor]]: req.maxTokens };
  if (ASKS_USAGE[flavor]) body['stream_options'] = { include_usage: true };
  return JSON.stringify(body);
}

class OpenAiTranslator implements Translator {
  readonly #provider: string;
  ended = false;
  #reason: FinishReason | undefined;
  #input = -1;
  #output = 0;

  constructor(provider: string) {
    this.#provider = provider;
  }

  event(_name: string, data: string, out: ChatEvent[]): void {
    if (data === '[DONE]') {
      this.ended = true;
      this.#close(out, this.#reason ?? 'stop');
      return;
    }
    const chunk = JSON.parse(data) as Chunk;
    // OpenAI sends `{"error":…}` inside a 200 stream; OpenRouter adds finish_reason 'error' to it.
    if (chunk.error !== undefined && chunk.error !== null) throw inStreamError(this.#provider, chunk.error);
    const usage = chunk.usage ?? chunk.x_groq?.usage;
    if (usage && typeof usage.prompt_tokens === 'number') {
      this.#input = usage.prompt_tokens;
      this.#output = typeof usage.completion_tokens === 'number' ? usage.completion_tokens : 0;
    }
    const choice = chunk.choices?.[0];
    if (choice === undefined) return;
    const text = choice.delta?.content;
    if (typeof text === 'string' && text.length > 0) out.push({ type: 'delta', text });
    const finish = choice.finish_reason;
    if (typeof finish === 'string') {
      if (finish === 'error') throw inStreamError(this.#provider, {});
      this.#reason = FINISH[finish] ?? 'stop';
    }
  }

  end(out: ChatEvent[]): void {
    // Some compatible servers close after the finishing chunk without [DONE]; that is still an answer.
    if (this.#reason === undefined) throw incomplete(this.#provider);
    this.#close(out, this.#reason);
  }

  #close(out: ChatEvent[], reason: FinishReason): void {
    if (this.#input >= 0) out.push({ type: 'usage', input: this.#input, output: this.#output });
    out.push({ type: 'finish', reason });
  }
}

/** `POST {base}/chat/completions` with `stream: true` (OpenAI, Mistral, xAI, Groq, DeepSeek, OpenRouter). */
export function streamOpenAiCompatible(flavor: OpenAiFlavor, target: ChatTarget, req: ChatRequest): ChatStream {
  const call = {
    provider: flavor,
    url: `${target.baseUrl}/chat/completions`,
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      authorization: `Bearer ${target.apiKey}`,
    },
  };
  return streamSse(call, requestBody(flavor, req), target, req.signal, new OpenAiTranslator(flavor));
}
