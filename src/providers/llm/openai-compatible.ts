import { CallAssembler, idFor, specsJson, withRawField } from './tool-wire.ts';
import { MIME, base64, count, incomplete, inStreamError, streamSse, type Translator } from './upstream.ts';
import type { ChatEvent, ChatMessage, ChatRequest, ChatStream, ChatTarget, FinishReason, RoundUsage } from './types.ts';

export type OpenAiFlavor = 'openai' | 'mistral' | 'xai' | 'groq' | 'deepseek' | 'openrouter';

interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  completion_tokens_details?: { reasoning_tokens?: unknown } | null;
  /** DeepSeek's count of prompt tokens served from its cache. */
  prompt_cache_hit_tokens?: unknown;
  /** OpenRouter's own charge for the call, in USD credits. */
  cost?: unknown;
}

interface ToolCallDelta {
  index?: unknown;
  id?: unknown;
  function?: { name?: unknown; arguments?: unknown };
}

interface Chunk {
  choices?: { delta?: { content?: unknown; tool_calls?: ToolCallDelta[] | null }; finish_reason?: unknown }[];
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

const FINISH: Record<string, FinishReason> = {
  stop: 'stop',
  length: 'length',
  content_filter: 'content_filter',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
};

/** Mistral accepts only nine-character alphanumeric call ids; OpenAI at most 40 characters. */
const callId = (flavor: OpenAiFlavor, id: string): string =>
  flavor === 'mistral' ? idFor(id, /^[A-Za-z0-9]{9}$/, 9, 'alnum') : idFor(id, /^[A-Za-z0-9_-]{1,40}$/, 40, 'word');

/** OpenAI-style usage in the meaning of RoundUsage (cached and reasoning tokens are already inside the totals). */
function usageOf(u: Usage): RoundUsage | undefined {
  const input = count(u.prompt_tokens);
  if (input === null) return undefined;
  return {
    input,
    output: count(u.completion_tokens) ?? 0,
    cachedInput: count(u.prompt_tokens_details?.cached_tokens) ?? count(u.prompt_cache_hit_tokens),
    reasoning: count(u.completion_tokens_details?.reasoning_tokens),
    costUsd: count(u.cost),
  };
}

function content(m: ChatMessage): unknown {
  if (!m.images || m.images.length === 0) return m.text;
  return [
    { type: 'text', text: m.text },
    ...m.images.map((i) => ({ type: 'image_url', image_url: { url: `data:${MIME[i.format]};base64,${base64(i.data)}` } })),
  ];
}

function requestBody(flavor: OpenAiFlavor, req: ChatRequest): string {
  const messages: unknown[] = [];
  if (req.system) messages.push({ role: 'system', content: req.system });
  for (const m of req.messages) {
    if (m.role === 'tool') {
      for (const r of m.toolResults ?? []) messages.push({ role: 'tool', tool_call_id: callId(flavor, r.id), content: r.content });
    } else if (m.role === 'assistant' && m.toolCalls && m.toolCalls.length > 0) {
      messages.push({
        role: 'assistant',
        content: m.text === '' ? null : m.text,
        tool_calls: m.toolCalls.map((c) => ({ id: callId(flavor, c.id), type: 'function', function: { name: c.name, arguments: c.arguments || '{}' } })),
      });
    } else {
      messages.push({ role: m.role, content: content(m) });
    }
  }
  const body: Record<string, unknown> = { model: req.model, messages, stream: true, [MAX_FIELD[flavor]]: req.maxTokens };
  const tools = req.tools && req.tools.length > 0 ? req.tools : undefined;
  if (tools) body['tool_choice'] = req.toolChoice ?? 'auto';
  if (ASKS_USAGE[flavor]) body['stream_options'] = { include_usage: true };
  return tools ? withRawField(JSON.stringify(body), 'tools', toolsJson(tools)) : JSON.stringify(body);
}

const toolsJson = specsJson((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));

class OpenAiTranslator implements Translator {
  readonly #provider: string;
  ended = false;
  #reason: FinishReason | undefined;
  #usage: RoundUsage | undefined;
  readonly #calls = new CallAssembler();

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
    if (usage) this.#usage = usageOf(usage) ?? this.#usage;
    const choice = chunk.choices?.[0];
    if (choice === undefined) return;
    const text = choice.delta?.content;
    if (typeof text === 'string' && text.length > 0) out.push({ type: 'delta', text });
    // Argument fragments arrive by index; a call is complete once a later index starts or the round ends.
    for (const d of choice.delta?.tool_calls ?? []) {
      const index = typeof d.index === 'number' ? d.index : 0;
      for (const call of this.#calls.add(index, d.id, d.function?.name, d.function?.arguments)) out.push({ type: 'tool_call', call });
    }
    const finish = choice.finish_reason;
    if (typeof finish === 'string') {
      if (finish === 'error') throw inStreamError(this.#provider, {});
      this.#reason = FINISH[finish] ?? 'stop';
      for (const call of this.#calls.finish()) out.push({ type: 'tool_call', call });
    }
  }

  end(out: ChatEvent[]): void {
    // Some compatible servers close after the finishing chunk without [DONE]; that is still an answer.
    if (this.#reason === undefined) throw incomplete(this.#provider);
    this.#close(out, this.#reason);
  }

  #close(out: ChatEvent[], reason: FinishReason): void {
    for (const call of this.#calls.finish()) out.push({ type: 'tool_call', call });
    if (this.#usage) out.push({ type: 'usage', ...this.#usage });
    // Some servers finish a round of calls with "stop": calls are what the round ended with.
    out.push({ type: 'finish', reason: this.#calls.any && reason === 'stop' ? 'tool_calls' : reason });
  }
}

/** `POST {base}/chat/completions` with `stream: true` (OpenAI, Mistral, xAI, Groq, DeepSeek, OpenRouter). */
export function streamOpenAiCompatible(flavor: OpenAiFlavor, target: ChatTarget, req: ChatRequest): ChatStream {
  const call = {
    provider: flavor,
    url: `${target.baseUrl}/chat/completions`,
    headers: { authorization: `Bearer ${target.apiKey}` },
  };
  return streamSse(call, requestBody(flavor, req), target, req.signal, new OpenAiTranslator(flavor));
}
