import { argumentsObject, idFor, newCallId, specsJson, withRawField } from './tool-wire.ts';
import { MIME, base64, count, incomplete, inStreamError, streamSse, type Translator } from './upstream.ts';
import type { ChatEvent, ChatMessage, ChatRequest, ChatStream, ChatTarget, FinishReason } from './types.ts';

const ANTHROPIC_VERSION = '2023-06-01';

const FINISH: Record<string, FinishReason> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_use: 'tool_calls',
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

/** Cached prompt tokens are reported apart from `input_tokens`; the prompt is all of them. */
const inputOf = (u: AnthropicUsage): number =>
  (count(u.input_tokens) ?? 0) + (count(u.cache_creation_input_tokens) ?? 0) + (count(u.cache_read_input_tokens) ?? 0);

/** Anthropic's tool_use ids: letters, digits, `_` and `-`. */
const callId = (id: string): string => idFor(id, /^[A-Za-z0-9_-]{1,64}$/, 40, 'word');

function content(m: ChatMessage): unknown {
  if (m.role === 'assistant' && m.toolCalls && m.toolCalls.length > 0) {
    return [
      ...(m.text === '' ? [] : [{ type: 'text', text: m.text }]),
      ...m.toolCalls.map((c) => ({ type: 'tool_use', id: callId(c.id), name: c.name, input: argumentsObject(c.arguments) })),
    ];
  }
  if (!m.images || m.images.length === 0) return m.text;
  // Images before the text, as Anthropic recommends.
  return [
    ...m.images.map((i) => ({ type: 'image', source: { type: 'base64', media_type: MIME[i.format], data: base64(i.data) } })),
    { type: 'text', text: m.text },
  ];
}

/**
 * Tool results travel as `tool_result` blocks in a user message, first in it; the user's next
 * message, when it follows at once, joins that same message (the roles alternate).
 */
function messages(req: ChatRequest): unknown[] {
  const out: { role: string; content: unknown }[] = [];
  let results: unknown[] | undefined;
  for (const m of req.messages) {
    if (m.role === 'tool') {
      results = (m.toolResults ?? []).map((r) => ({
        type: 'tool_result',
        tool_use_id: callId(r.id),
        content: r.content,
        ...(r.isError ? { is_error: true } : {}),
      }));
      out.push({ role: 'user', content: results });
      continue;
    }
    const c = content(m);
    if (m.role === 'user' && results !== undefined) {
      results.push(...(typeof c === 'string' ? [{ type: 'text', text: c }] : (c as unknown[])));
    } else {
      out.push({ role: m.role, content: c });
    }
    results = undefined;
  }
  return out;
}

function requestBody(req: ChatRequest): string {
  const tools = req.tools && req.tools.length > 0 ? req.tools : undefined;
  const body = JSON.stringify({
    model: req.model,
    max_tokens: req.maxTokens,
    ...(req.system ? { system: req.system } : {}),
    messages: messages(req),
    ...(tools ? { tool_choice: { type: req.toolChoice ?? 'auto' } } : {}),
    stream: true,
  });
  return tools ? withRawField(body, 'tools', toolsJson(tools)) : body;
}

const toolsJson = specsJson((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));

class AnthropicTranslator implements Translator {
  ended = false;
  #reason: FinishReason | undefined;
  #input = -1;
  #output = 0;
  #cached: number | null = null;
  /** tool_use blocks being streamed, by content-block index. */
  readonly #calls = new Map<number, { id: string; name: string; args: string }>();

  event(name: string, data: string, out: ChatEvent[]): void {
    // Only the events that carry something are parsed; ping is skipped unread.
    switch (name) {
      case 'content_block_delta': {
        const e = JSON.parse(data) as { index?: unknown; delta?: { type?: unknown; text?: unknown; partial_json?: unknown } };
        const text = e.delta?.text;
        if (e.delta?.type === 'text_delta' && typeof text === 'string' && text.length > 0) out.push({ type: 'delta', text });
        else if (e.delta?.type === 'input_json_delta' && typeof e.delta.partial_json === 'string') {
          const call = this.#calls.get(typeof e.index === 'number' ? e.index : -1);
          if (call) call.args += e.delta.partial_json;
        }
        return;
      }
      case 'content_block_start': {
        if (!data.includes('"tool_use"')) return;
        const e = JSON.parse(data) as { index?: unknown; content_block?: { type?: unknown; id?: unknown; name?: unknown } };
        const b = e.content_block;
        if (b?.type === 'tool_use' && typeof e.index === 'number') {
          this.#calls.set(e.index, { id: typeof b.id === 'string' ? b.id : newCallId(), name: typeof b.name === 'string' ? b.name : '', args: '' });
        }
        return;
      }
      case 'content_block_stop': {
        if (this.#calls.size === 0) return;
        const e = JSON.parse(data) as { index?: unknown };
        const index = typeof e.index === 'number' ? e.index : -1;
        const call = this.#calls.get(index);
        if (call) {
          this.#calls.delete(index);
          out.push({ type: 'tool_call', call: { id: call.id, name: call.name, arguments: call.args } });
        }
        return;
      }
      case 'message_start': {
        const e = JSON.parse(data) as { message?: { usage?: AnthropicUsage } };
        const usage = e.message?.usage;
        if (usage) {
          this.#input = inputOf(usage);
          this.#output = count(usage.output_tokens) ?? 0;
          this.#cached = count(usage.cache_read_input_tokens);
          // Counted so far: a stream cut off later still reports its input (DESIGN §13).
          this.#usage(out);
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
          if (typeof e.usage.cache_read_input_tokens === 'number') this.#cached = e.usage.cache_read_input_tokens;
          this.#usage(out);
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
    this.#usage(out);
    out.push({ type: 'finish', reason });
  }

  /** The figures so far; a later usage event replaces an earlier one. Anthropic does not report reasoning apart from output. */
  #usage(out: ChatEvent[]): void {
    if (this.#input >= 0) out.push({ type: 'usage', input: this.#input, output: this.#output, cachedInput: this.#cached, reasoning: null, costUsd: null });
  }
}

/** Anthropic Messages API: `POST {base}/messages`, named SSE events message_start … message_stop. */
export function streamAnthropic(target: ChatTarget, req: ChatRequest): ChatStream {
  const call = {
    provider: 'anthropic',
    url: `${target.baseUrl}/messages`,
    headers: { 'x-api-key': target.apiKey, 'anthropic-version': ANTHROPIC_VERSION },
  };
  return streamSse(call, requestBody(req), target, req.signal, new AnthropicTranslator());
}
