// An assistant reply as a sequence of parts (DESIGN §11): its text, the tool calls it made and
// their results, in the order they happened. Stored as jsonb on the message, shown as `parts`, and
// sent back to the provider on later turns in the provider's own form.
import { argumentsObject, type ChatMessage, type ToolCallPart, type ToolResultPart } from '../../providers/llm/index.ts';
import type { ToolOutcome } from '../advisor-tools/toolbox.ts';

/** As stored: a call keeps the model's own argument text and the provider's opaque signature. */
export type StoredPart =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'tool_call'; readonly id: string; readonly name: string; readonly arguments: string; readonly signature?: string }
  | ({ readonly type: 'tool_result'; readonly id: string; readonly name: string } & ToolOutcome<string>);

/** As the API shows it: a call's arguments parsed (an object; `{}` when the model's text was not one). */
export type ApiPart =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'tool_call'; readonly id: string; readonly name: string; readonly arguments: Readonly<Record<string, unknown>> }
  | ({ readonly type: 'tool_result'; readonly id: string; readonly name: string } & ToolOutcome<string>);

/** PostgreSQL stores no `\u0000` in text or jsonb; a model can produce one. */
export const storable = (text: string): string => (text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text);

/** Collects a reply's parts as the turn runs. */
export class PartsLog {
  readonly #parts: StoredPart[] = [];
  #text = '';
  #calls = 0;
  #deltas = 0;

  /** All the reply's text, as `content` stores it. */
  get text(): string {
    return this.#text;
  }

  /** Deltas sent: a turn that sent one is produced (charged). */
  get deltas(): number {
    return this.#deltas;
  }

  get parts(): readonly StoredPart[] {
    return this.#parts;
  }

  addText(piece: string): void {
    this.#deltas++;
    this.#text += piece;
    const last = this.#parts.at(-1);
    if (last?.type === 'text') this.#parts[this.#parts.length - 1] = { type: 'text', text: last.text + piece };
    else this.#parts.push({ type: 'text', text: piece });
  }

  addCall(c: ToolCallPart): void {
    this.#calls++;
    this.#parts.push({ type: 'tool_call', id: c.id, name: c.name, arguments: c.arguments, ...(c.signature !== undefined ? { signature: c.signature } : {}) });
  }

  addResult(c: Pick<ToolCallPart, 'id' | 'name'>, body: ToolOutcome<string>): void {
    this.#parts.push({ type: 'tool_result', id: c.id, name: c.name, ...body });
  }

  /** What the message stores: null when the reply is text only (its content says it all). */
  stored(): string | null {
    return this.#calls === 0 ? null : storable(JSON.stringify(this.#parts));
  }
}

/** A tool result as the model reads it: the result object, or `{"error":{code,message}}`. */
export function resultPart(c: { id: string; name: string }, body: ToolOutcome<string>): ToolResultPart {
  return body.ok
    ? { id: c.id, name: c.name, content: JSON.stringify(body.result), isError: false }
    : { id: c.id, name: c.name, content: JSON.stringify({ error: body.error }), isError: true };
}

export function apiParts(stored: unknown, content: string): ApiPart[] {
  if (!Array.isArray(stored)) return content.length > 0 ? [{ type: 'text', text: content }] : [];
  return (stored as StoredPart[]).map((p) =>
    p.type === 'tool_call' ? { type: 'tool_call', id: p.id, name: p.name, arguments: argumentsObject(p.arguments) } : p,
  );
}

/**
 * A stored reply as the provider is sent it again: assistant messages (text and the calls it made)
 * each followed by a tool message with their results. A call without its result (the turn stopped
 * while it ran) is left out: providers refuse a call that is not answered.
 */
export function replyMessages(stored: unknown, content: string): ChatMessage[] {
  if (!Array.isArray(stored)) return content.length > 0 ? [{ role: 'assistant', text: content }] : [];
  const parts = stored as StoredPart[];
  const answered = new Set(parts.flatMap((p) => (p.type === 'tool_result' ? [p.id] : [])));
  const out: ChatMessage[] = [];
  let text = '';
  let calls: ToolCallPart[] = [];
  let results: ToolResultPart[] = [];
  const flush = (): void => {
    if (text.length > 0 || calls.length > 0) out.push({ role: 'assistant', text, ...(calls.length > 0 ? { toolCalls: calls } : {}) });
    if (results.length > 0) out.push({ role: 'tool', text: '', toolResults: results });
    text = '';
    calls = [];
    results = [];
  };
  for (const p of parts) {
    if (p.type === 'text') {
      if (calls.length > 0) flush();
      text += p.text;
    } else if (p.type === 'tool_call') {
      if (results.length > 0) flush();
      if (answered.has(p.id)) calls.push({ id: p.id, name: p.name, arguments: p.arguments, ...(p.signature !== undefined ? { signature: p.signature } : {}) });
    } else {
      results.push(resultPart(p, p));
    }
  }
  flush();
  return out;
}
