// What the three wire protocols share when they carry tool calls and results.
import { createHash, randomBytes } from 'node:crypto';
import type { ChatMessage, ToolCallPart, ToolResultPart, ToolSpec } from './types.ts';

/**
 * A protocol's JSON array of tool declarations, `form` of each spec serialised once per spec object
 * (the toolbox's specs are constants: a turn's request then costs no schema serialisation).
 */
export function specsJson(form: (spec: ToolSpec) => unknown): (tools: readonly ToolSpec[]) => string {
  const made = new WeakMap<ToolSpec, string>();
  const one = (t: ToolSpec): string => {
    let json = made.get(t);
    if (json === undefined) made.set(t, (json = JSON.stringify(form(t))));
    return json;
  };
  return (tools) => `[${tools.map(one).join(',')}]`;
}

/** An object's JSON text with `key` added last, its value `raw` (JSON text already). */
export function withRawField(json: string, key: string, raw: string): string {
  const field = `${JSON.stringify(key)}:${raw}`;
  return json === '{}' ? `{${field}}` : `${json.slice(0, -1)},${field}}`;
}

/** `text` parsed when it is a JSON object; undefined when it is anything else (an array, a scalar, not JSON). */
export function jsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A call's arguments as an object, where one is wanted (Anthropic `input`, Gemini `args`, the API's
 * `arguments`). Arguments the model produced that were not a JSON object become `{}`; their result
 * already told the model they were invalid.
 */
export const argumentsObject = (args: string): Record<string, unknown> => jsonObject(args) ?? {};

/** A result's content (a JSON object as text, by construction) as an object, for Gemini's `response`. */
export function resultObject(result: ToolResultPart): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(result.content);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : { result: v };
  } catch {
    return { result: result.content };
  }
}

/**
 * A call id in the form a protocol accepts. A conversation can change provider between turns, so ids
 * made by one (Anthropic `toolu_…`, OpenAI `call_…`, generated ones) are replayed to another: an id
 * already in the form is kept, any other is replaced by a stable digest of it (the same for the call
 * and its result).
 */
export function idFor(id: string, form: RegExp, length: number, alphabet: 'alnum' | 'word'): string {
  if (form.test(id)) return id;
  const digest = createHash('sha256').update(id).digest('base64url');
  const clean = alphabet === 'alnum' ? digest.replace(/[^A-Za-z0-9]/g, '') : digest;
  return clean.slice(0, length);
}

/** An id for a call whose protocol gave none (Gemini before its ids). */
export function newCallId(): string {
  return `call_${randomBytes(12).toString('base64url')}`;
}

/** Assembles OpenAI-style `tool_calls` deltas: fragments of each call arrive by `index`. */
export class CallAssembler {
  readonly #calls = new Map<number, { id: string; name: string; args: string }>();
  #flushed = -1;

  /** Adds one fragment; returns the calls it completes (every lower index, once a higher one starts). */
  add(index: number, id: unknown, name: unknown, args: unknown): ToolCallPart[] {
    let call = this.#calls.get(index);
    if (call === undefined) {
      call = { id: '', name: '', args: '' };
      this.#calls.set(index, call);
    }
    if (typeof id === 'string' && id !== '') call.id = id;
    if (typeof name === 'string') call.name += name;
    if (typeof args === 'string') call.args += args;
    return this.#flushBelow(index);
  }

  /** The calls not yet given out, in index order (the round ended). */
  finish(): ToolCallPart[] {
    return this.#flushBelow(Number.POSITIVE_INFINITY);
  }

  get any(): boolean {
    return this.#calls.size > 0;
  }

  #flushBelow(limit: number): ToolCallPart[] {
    const done: ToolCallPart[] = [];
    for (const index of [...this.#calls.keys()].sort((a, b) => a - b)) {
      if (index >= limit || index <= this.#flushed) continue;
      const c = this.#calls.get(index);
      if (c === undefined) continue;
      done.push({ id: c.id === '' ? newCallId() : c.id, name: c.name, arguments: c.args });
      this.#flushed = index;
    }
    return done;
  }
}

/**
 * The conversation for a round that offers no tools: earlier calls and results become text. Anthropic
 * refuses `tool_use` blocks in a request without `tools`, and a model that cannot call tools should
 * still see what was looked up before. Results are folded into the user message that follows them.
 */
export function withoutToolParts(messages: readonly ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  let pending = '';
  for (const m of messages) {
    if (m.role === 'tool') {
      for (const r of m.toolResults ?? []) pending += `[result of ${r.name} (${r.id})]: ${r.content}\n`;
      continue;
    }
    if (m.role === 'assistant') {
      if (pending !== '') out.push({ role: 'user', text: pending.trimEnd() });
      pending = '';
      const calls = (m.toolCalls ?? []).map((c) => `[called ${c.name} (${c.id}) with ${c.arguments || '{}'}]`);
      out.push({ role: 'assistant', text: [...calls, m.text].filter((t) => t !== '').join('\n') });
      continue;
    }
    out.push(pending === '' ? m : { ...m, text: `${pending}\n${m.text}` });
    pending = '';
  }
  if (pending !== '') out.push({ role: 'user', text: pending.trimEnd() });
  return out;
}

/** Whether any message carries tool parts. */
export const hasToolParts = (messages: readonly ChatMessage[]): boolean => messages.some((m) => m.role === 'tool' || (m.toolCalls?.length ?? 0) > 0);
