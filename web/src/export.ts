// A conversation as a Markdown file the trader keeps: its title, each message's text as it was written,
// tool calls and their results as readable blocks, and what each reply used.
import type { Schemas } from './api/client.ts';
import { providerName } from './catalogue.ts';
import { chargeWords, usageWords } from './money.ts';

type Conversation = Schemas['ConversationWithMessages'];
type Message = Schemas['Message'];
type Part = Schemas['MessagePart'];

const TOOL_NAMES: Record<string, string> = {
  get_quote: 'Quote',
  get_price_history: 'Price history',
  get_market_status: 'Market status',
  search_symbols: 'Symbol search',
  list_my_accounts: 'Your accounts',
};

/** A block no text inside it can close (the fence is longer than any run of backticks in it). */
function fenced(text: string, lang: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}${lang}\n${text}\n${fence}`;
}

function partText(p: Part): string {
  if (p.type === 'text') return p.text;
  if (p.type === 'tool_call')
    return `**Tool call: \`${p.name}\`** (${TOOL_NAMES[p.name] ?? p.name})\n\n${fenced(JSON.stringify(p.arguments, null, 2), 'json')}`;
  if (p.ok) return `**Result of \`${p.name}\`**\n\n${fenced(JSON.stringify(p.result, null, 2), 'json')}`;
  return `**\`${p.name}\` failed:** ${p.error.code} — ${p.error.message}`;
}

function messageText(m: Message): string {
  if (m.role === 'user') {
    const images = m.attachments.length > 0 ? `\n\n_${m.attachments.length} image${m.attachments.length === 1 ? '' : 's'} attached_` : '';
    return `## You\n\n${m.text}${images}`;
  }
  const body = m.parts.length > 0 ? m.parts.map(partText).join('\n\n') : m.text;
  const notes = [
    m.status === 'interrupted' ? 'Stopped' : m.status === 'failed' ? `Failed (${m.error?.code ?? 'error'})` : '',
    m.usage ? usageWords(m.usage) : '',
    m.billing ? chargeWords(m.billing) : '',
  ].filter(Boolean);
  return `## Advisor\n\n${body}${notes.length > 0 ? `\n\n_${notes.join(' · ')}_` : ''}`;
}

/** The whole conversation (every page of its messages, oldest first) as Markdown. */
export function conversationMarkdown(c: Conversation, messages: readonly Message[]): string {
  const head = `# ${c.title}\n\n_${providerName(c.provider)} · ${c.model} · started ${new Date(c.createdAt).toLocaleString()}_`;
  return `${[head, ...messages.map(messageText)].join('\n\n')}\n`;
}

/** A file name from the title: lower case, words joined by dashes, with the date. */
export function exportFileName(c: Conversation): string {
  const slug =
    c.title
      .toLowerCase()
      .normalize('NFKD')
      .replace(/[^\p{L}\p{N}]+/gu, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 60) || 'conversation';
  return `${slug}-${c.createdAt.slice(0, 10)}.md`;
}

/** Hands a text to the browser as a file download. */
export function download(name: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/markdown;charset=utf-8' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
