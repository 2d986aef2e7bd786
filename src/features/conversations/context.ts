import type { Catalogue } from '../../catalogue.ts';
import type { ChatImage, ChatMessage } from '../../providers/llm/index.ts';
import type { HistoryRow } from './repo.ts';

/** The persona's system prompt; a persona since removed from the catalogue gives none. */
export function systemPrompt(catalogue: Catalogue, personaId: string | null | undefined): string | undefined {
  if (!personaId) return undefined;
  return catalogue.personas.find((p) => p.personaId === personaId)?.systemPrompt;
}

function imageNote(n: number): string {
  return n === 1 ? '[an image was attached to this message; it is not repeated here]' : `[${n} images were attached to this message; they are not repeated here]`;
}

/**
 * Earlier turns (already trimmed to the budget) plus the new message with its images. Only the new
 * message's images are sent: earlier ones would be paid for again on every turn, so they are named
 * in a note instead. Providers want turns to alternate and to open with the user, so a reply left
 * without its question by the trimming is dropped and same-role neighbours (after a failed, empty
 * reply) are joined.
 */
export function buildMessages(history: readonly HistoryRow[], text: string, images: readonly ChatImage[]): ChatMessage[] {
  const turns: { role: 'user' | 'assistant'; text: string }[] = [];
  for (const row of history) {
    const content = row.images > 0 ? `${row.content}\n\n${imageNote(row.images)}` : row.content;
    const last = turns.at(-1);
    if (last === undefined && row.role === 'assistant') continue;
    if (last !== undefined && last.role === row.role) last.text = `${last.text}\n\n${content}`;
    else turns.push({ role: row.role, text: content });
  }
  const last = turns.at(-1);
  const messages: ChatMessage[] = [];
  if (last !== undefined && last.role === 'user') {
    turns.pop();
    for (const t of turns) messages.push(t);
    messages.push({ role: 'user', text: `${last.text}\n\n${text}`, ...(images.length > 0 ? { images } : {}) });
    return messages;
  }
  for (const t of turns) messages.push(t);
  messages.push({ role: 'user', text, ...(images.length > 0 ? { images } : {}) });
  return messages;
}

const TITLE_CHARS = 80;

/** DESIGN §7: the first message's text, whitespace collapsed, cut at 80 characters (code points). */
export function defaultTitle(text: string): string {
  const collapsed = text.replace(/\s+/g, ' ').trim();
  let out = '';
  let n = 0;
  for (const ch of collapsed) {
    if (n === TITLE_CHARS) break;
    out += ch;
    n++;
  }
  return out.trimEnd();
}

export function normaliseTitle(title: string): string {
  return title.replace(/\s+/g, ' ').trim();
}
