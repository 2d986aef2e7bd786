import { MIME, base64, incomplete, inStreamError, streamSse, type Translator } from './upstream.ts';
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

interface Chunk {
  candidates?: { content?: { parts?: { text?: unknown; thought?: unknown }[] }; finishReason?: unknown }[];
  usageMetadata?: { promptTokenCount?: unknown; candidatesTokenCount?: unknown; thoughtsTokenCount?: unknown };
  promptFeedback?: { blockReason?: unknown };
  error?: unknown;
}

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

function parts(m: ChatMessage): unknown[] {
  const list: unknown[] = [];
  // Images before the text, as Google recommends for image prompts.
  for (const i of m.images ?? []) list.push({ inlineData: { mimeType: MIME[i.format], data: base64(i.data) } });
  list.push({ text: m.text });
  return list;
}

export function requestBody(req: ChatRequest): string {
  return JSON.stringify({
    contents: req.messages.map((m) => ({ role: m.role === 'assistant' ? 'model' : 'user', parts: parts(m) })),
    ...(req.system ? { systemInstruction: { parts: [{ text: req.system }] } } : {}),
    generationConfig: { maxOutputTokens: req.maxTokens },
  });
}

class GeminiTranslator implements Translator {
  // Gemini has no end marker: the body simply ends after the chunk with finishReason.
  readonly ended = false;
  #reason: FinishReason | undefined;
  #input = -1;
  #output = 0;

  event(_name: string, data: string, out: ChatEvent[]): void {
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error !== undefined && chunk.error !== null) throw inStreamError('google', chunk.error);
    const candidate = chunk.candidates?.[0];
    const list = candidate?.content?.parts;
    if (list) {
      for (const part of list) {
        // Thought summaries are not part of the reply.
        if (typeof part.text === 'string' && part.text.length > 0 && part.thought !== true) out.push({ type: 'delta', text: part.text });
      }
    }
    // usageMetadata carries running totals on every chunk; the last one wins.
    const usage = chunk.usageMetadata;
    if (usage) {
      this.#input = num(usage.promptTokenCount);
      this.#output = num(usage.candidatesTokenCount) + num(usage.thoughtsTokenCount);
    }
    const finish = candidate?.finishReason;
    if (typeof finish === 'string' && finish !== 'FINISH_REASON_UNSPECIFIED') this.#reason = FINISH[finish] ?? 'stop';
    // A blocked prompt comes back with no candidates at all.
    if (chunk.promptFeedback?.blockReason !== undefined) this.#reason = 'content_filter';
  }

  end(out: ChatEvent[]): void {
    if (this.#reason === undefined) throw incomplete('google');
    if (this.#input >= 0) out.push({ type: 'usage', input: this.#input, output: this.#output });
    out.push({ type: 'finish', reason: this.#reason });
  }
}

/** Gemini API: `POST {base}/models/{model}:streamGenerateContent?alt=sse`, CRLF-separated events. */
export function streamGemini(target: ChatTarget, req: ChatRequest): ChatStream {
  const model = req.model.startsWith('models/') ? req.model.slice('models/'.length) : req.model;
  const call = {
    provider: 'google',
    url: `${target.baseUrl}/models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`,
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-goog-api-key': target.apiKey,
    },
  };
  return streamSse(call, requestBody(req), target, req.signal, new GeminiTranslator());
}
