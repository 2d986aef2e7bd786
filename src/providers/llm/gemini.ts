import { argumentsObject, newCallId, resultObject, specsJson, withRawField } from './tool-wire.ts';
import { MIME, base64, count, incomplete, inStreamError, streamSse, type Translator } from './upstream.ts';
import type { ChatEvent, ChatMessage, ChatRequest, ChatStream, ChatTarget, FinishReason } from './types.ts';

const FINISH: Record<string, FinishReason> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content_filter',
  RECITATION: 'content_filter',
  BLOCKLIST: 'content_filter',
  PROHIBITED_CONTENT: 'content_filter',
  SPII: 'content_filter',
  IMAGE_SAFETY: 'content_filter',
};

interface Part {
  text?: unknown;
  thought?: unknown;
  functionCall?: { id?: unknown; name?: unknown; args?: unknown };
  thoughtSignature?: unknown;
}

interface Chunk {
  candidates?: { content?: { parts?: Part[] }; finishReason?: unknown }[];
  usageMetadata?: { promptTokenCount?: unknown; candidatesTokenCount?: unknown; thoughtsTokenCount?: unknown; cachedContentTokenCount?: unknown };
  promptFeedback?: { blockReason?: unknown };
  error?: unknown;
}

function parts(m: ChatMessage): unknown[] {
  if (m.role === 'tool') {
    return (m.toolResults ?? []).map((r) => ({ functionResponse: { id: r.id, name: r.name, response: resultObject(r) } }));
  }
  if (m.role === 'assistant' && m.toolCalls && m.toolCalls.length > 0) {
    return [
      ...(m.text === '' ? [] : [{ text: m.text }]),
      // A call goes back with the thought signature it came with (Gemini's thinking models require it).
      ...m.toolCalls.map((c) => ({
        functionCall: { id: c.id, name: c.name, args: argumentsObject(c.arguments) },
        ...(c.signature ? { thoughtSignature: c.signature } : {}),
      })),
    ];
  }
  const list: unknown[] = [];
  // Images before the text, as Google recommends for image prompts.
  for (const i of m.images ?? []) list.push({ inlineData: { mimeType: MIME[i.format], data: base64(i.data) } });
  list.push({ text: m.text });
  return list;
}

function requestBody(req: ChatRequest): string {
  const tools = req.tools && req.tools.length > 0 ? req.tools : undefined;
  const body = JSON.stringify({
    contents: req.messages.map((m) => ({ role: m.role === 'assistant' ? 'model' : 'user', parts: parts(m) })),
    ...(req.system ? { systemInstruction: { parts: [{ text: req.system }] } } : {}),
    ...(tools ? { toolConfig: { functionCallingConfig: { mode: req.toolChoice === 'none' ? 'NONE' : 'AUTO' } } } : {}),
    generationConfig: { maxOutputTokens: req.maxTokens },
  });
  return tools ? withRawField(body, 'tools', `[{"functionDeclarations":${toolsJson(tools)}}]`) : body;
}

// parametersJsonSchema takes the JSON Schema as it is (`parameters` takes only an OpenAPI subset).
const toolsJson = specsJson((t) => ({ name: t.name, description: t.description, parametersJsonSchema: t.parameters }));

class GeminiTranslator implements Translator {
  // Gemini has no end marker: the body simply ends after the chunk with finishReason.
  readonly ended = false;
  #reason: FinishReason | undefined;
  #input = -1;
  #output = 0;
  #cached: number | null = null;
  #reasoning: number | null = null;
  #called = false;

  event(_name: string, data: string, out: ChatEvent[]): void {
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error !== undefined && chunk.error !== null) throw inStreamError('google', chunk.error);
    const candidate = chunk.candidates?.[0];
    const list = candidate?.content?.parts;
    if (list) {
      for (const part of list) {
        // Thought summaries are not part of the reply.
        if (typeof part.text === 'string' && part.text.length > 0 && part.thought !== true) out.push({ type: 'delta', text: part.text });
        // A function call arrives whole, its args an object; ids are newer and not always given.
        const fc = part.functionCall;
        if (fc && typeof fc.name === 'string') {
          this.#called = true;
          const id = typeof fc.id === 'string' && fc.id !== '' ? fc.id : newCallId();
          const signature = typeof part.thoughtSignature === 'string' ? { signature: part.thoughtSignature } : {};
          out.push({ type: 'tool_call', call: { id, name: fc.name, arguments: JSON.stringify(fc.args ?? {}), ...signature } });
        }
      }
    }
    // usageMetadata carries running totals on every chunk; the last one wins. Its JSON is proto3's,
    // which leaves out fields whose value is zero: an absent cache or thoughts count is a reported 0.
    const usage = chunk.usageMetadata;
    if (usage) {
      this.#input = count(usage.promptTokenCount) ?? 0;
      this.#output = (count(usage.candidatesTokenCount) ?? 0) + (count(usage.thoughtsTokenCount) ?? 0);
      this.#cached = count(usage.cachedContentTokenCount) ?? 0;
      this.#reasoning = count(usage.thoughtsTokenCount) ?? 0;
      // Counted so far: a stream cut off later keeps what it reported (DESIGN §13).
      this.#usage(out);
    }
    const finish = candidate?.finishReason;
    if (typeof finish === 'string' && finish !== 'FINISH_REASON_UNSPECIFIED') this.#reason = FINISH[finish] ?? 'stop';
    // A blocked prompt comes back with no candidates at all.
    if (chunk.promptFeedback?.blockReason !== undefined) this.#reason = 'content_filter';
  }

  #usage(out: ChatEvent[]): void {
    if (this.#input >= 0)
      out.push({ type: 'usage', input: this.#input, output: this.#output, cachedInput: this.#cached, reasoning: this.#reasoning, costUsd: null });
  }

  end(out: ChatEvent[]): void {
    if (this.#reason === undefined) throw incomplete('google');
    // Gemini ends a round of function calls with STOP.
    out.push({ type: 'finish', reason: this.#called && this.#reason === 'stop' ? 'tool_calls' : this.#reason });
  }
}

/** Gemini API: `POST {base}/models/{model}:streamGenerateContent?alt=sse`, CRLF-separated events. */
export function streamGemini(target: ChatTarget, req: ChatRequest): ChatStream {
  const model = req.model.startsWith('models/') ? req.model.slice('models/'.length) : req.model;
  const call = {
    provider: 'google',
    url: `${target.baseUrl}/models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`,
    headers: { 'x-goog-api-key': target.apiKey },
  };
  return streamSse(call, requestBody(req), target, req.signal, new GeminiTranslator());
}
