// How each provider refuses a request whose tool history does not hold together: the fakes answer
// such a request with the provider's own 400, so a test sees what the real API would do.
import { isRecord } from './http-fake.ts';

const list = (x: unknown): unknown[] => (Array.isArray(x) ? x : []);

/** OpenAI-style chat: every assistant `tool_calls` answered by `role: "tool"` messages right after it. */
export function openAiToolProblem(messages: unknown[], mistral: boolean): string | undefined {
  let open: Set<string> | undefined;
  for (const [i, m] of messages.entries()) {
    if (!isRecord(m)) return `messages.[${i}]: must be an object`;
    if (m['role'] === 'tool') {
      const id = m['tool_call_id'];
      if (typeof id !== 'string' || open === undefined || !open.has(id)) {
        return `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.`;
      }
      open.delete(id);
      continue;
    }
    if (open !== undefined && open.size > 0) {
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`;
    }
    open = undefined;
    if (m['role'] === 'assistant' && Array.isArray(m['tool_calls'])) {
      open = new Set();
      for (const c of m['tool_calls']) {
        const id = isRecord(c) ? c['id'] : undefined;
        if (typeof id !== 'string') return `messages.[${i}].tool_calls: id is required`;
        if (mistral && !/^[a-zA-Z0-9]{9}$/.test(id)) return `Tool call id was ${id} but must be a-z, A-Z, 0-9, with a length of 9.`;
        open.add(id);
      }
    }
  }
  if (open !== undefined && open.size > 0) return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.`;
  return undefined;
}

/** Anthropic Messages: `tool_result` blocks answer the `tool_use` blocks of the message right before, and need `tools`. */
export function anthropicToolProblem(messages: unknown[], hasTools: boolean): string | undefined {
  let uses: string[] = [];
  for (const [i, m] of messages.entries()) {
    const blocks = isRecord(m) ? list(m['content']).filter(isRecord) : [];
    const results = blocks.filter((b) => b['type'] === 'tool_result').map((b) => String(b['tool_use_id']));
    const used = blocks.filter((b) => b['type'] === 'tool_use').map((b) => String(b['id']));
    if ((results.length > 0 || used.length > 0) && !hasTools) return 'Requests which include `tool_use` or `tool_result` blocks must define tools.';
    const missing = uses.filter((id) => !results.includes(id));
    if (missing.length > 0) {
      return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
    }
    const unexpected = results.filter((id) => !uses.includes(id));
    if (unexpected.length > 0) {
      return `messages.${i}.content.0: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${unexpected.join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
    }
    const firstNonResult = blocks.findIndex((b) => b['type'] !== 'tool_result');
    if (results.length > 0 && firstNonResult >= 0 && firstNonResult < results.length) {
      return `messages.${i}: \`tool_result\` blocks must come first in the content.`;
    }
    uses = used;
  }
  return undefined;
}

/** Gemini: a user turn of function responses answers every function call of the model turn before it. */
export function geminiToolProblem(contents: unknown[]): string | undefined {
  let calls = 0;
  for (const c of contents) {
    const parts = isRecord(c) ? list(c['parts']).filter(isRecord) : [];
    const responses = parts.filter((p) => isRecord(p['functionResponse'])).length;
    if (responses > 0 || calls > 0) {
      if (responses !== calls) {
        return 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.';
      }
    }
    calls = parts.filter((p) => isRecord(p['functionCall'])).length;
  }
  return undefined;
}
