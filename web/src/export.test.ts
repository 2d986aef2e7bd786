import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Schemas } from './api/client.ts';
import { conversationMarkdown, exportFileName } from './export.ts';

type Message = Schemas['Message'];

const message = (m: Partial<Message> & Pick<Message, 'id' | 'role' | 'text'>): Message => ({
  parts: [],
  status: 'complete',
  clientMessageId: null,
  finishReason: null,
  usage: null,
  error: null,
  attachments: [],
  billing: null,
  createdAt: '2026-11-28T10:00:00Z',
  completedAt: null,
  ...m,
});

const conversation = (title: string): Schemas['ConversationWithMessages'] => ({
  id: 'c1',
  title,
  provider: 'openai',
  model: 'gpt-4o-mini',
  personaId: null,
  messageCount: 2,
  lastMessageAt: '2026-11-28T10:00:05Z',
  createdAt: '2026-11-28T10:00:00Z',
  updatedAt: '2026-11-28T10:00:05Z',
  messages: [],
  nextCursor: null,
});

describe('conversationMarkdown', () => {
  it('writes the title, the provider and model, each message, tool blocks and what each reply used', () => {
    const md = conversationMarkdown(conversation('Which accounts?'), [
      message({
        id: 'u1',
        role: 'user',
        text: 'Which accounts do I have?',
        attachments: [{ id: 'i1', format: 'png', url: '/x' } as Message['attachments'][number]],
      }),
      message({
        id: 'a1',
        role: 'assistant',
        text: 'You have one.',
        parts: [
          { type: 'tool_call', id: 't1', name: 'list_my_accounts', arguments: {} },
          { type: 'tool_result', id: 't1', name: 'list_my_accounts', ok: true, result: { name: 'Swing' } },
          { type: 'text', text: 'You have **one** account.' },
        ],
        usage: { inputTokens: 1210, outputTokens: 301, cachedInputTokens: null, reasoningTokens: null, estimatedCostUsd: null },
        billing: { source: 'allowance', credits: 0, status: 'charged' },
      }),
    ]);
    assert.match(
      md,
      /^# Which accounts\?\n\n_OpenAI · gpt-4o-mini · started .+_\n\n## You\n\nWhich accounts do I have\?\n\n_1 image attached_\n\n## Advisor\n\n/,
    );
    assert.match(md, /\*\*Tool call: `list_my_accounts`\*\* \(Your accounts\)\n\n```json\n\{\}\n```/);
    assert.match(md, /\*\*Result of `list_my_accounts`\*\*\n\n```json\n\{\n {2}"name": "Swing"\n\}\n```/);
    assert.match(md, /You have \*\*one\*\* account\.\n\n_1,210 tokens in · 301 out · 1 free turn_\n$/);
  });

  it('says a reply stopped or failed, and a failed tool call’s code', () => {
    const md = conversationMarkdown(conversation('t'), [
      message({ id: 'a1', role: 'assistant', text: 'Half', status: 'interrupted' }),
      message({
        id: 'a2',
        role: 'assistant',
        text: '',
        status: 'failed',
        error: { code: 'PROVIDER_ERROR', retryable: false },
        parts: [{ type: 'tool_result', id: 't', name: 'get_quote', ok: false, error: { code: 'UNKNOWN_SYMBOL', message: 'no such symbol' } }],
      }),
    ]);
    assert.match(md, /## Advisor\n\nHalf\n\n_Stopped_/);
    assert.match(md, /\*\*`get_quote` failed:\*\* UNKNOWN_SYMBOL — no such symbol\n\n_Failed \(PROVIDER_ERROR\)_/);
  });

  it('fences a tool block longer than any run of backticks inside it', () => {
    const md = conversationMarkdown(conversation('t'), [
      message({ id: 'a1', role: 'assistant', text: '', parts: [{ type: 'tool_call', id: 't', name: 'search_symbols', arguments: { q: '````' } }] }),
    ]);
    assert.match(md, /`````json\n\{\n {2}"q": "````"\n\}\n`````/);
  });
});

describe('exportFileName', () => {
  it('makes a lower-case dashed slug of the title with the date', () => {
    assert.equal(exportFileName(conversation('Which accounts do I have?')), 'which-accounts-do-i-have-2026-11-28.md');
    assert.equal(exportFileName(conversation('AAPL & MSFT — week 48!')), 'aapl-msft-week-48-2026-11-28.md');
    assert.equal(exportFileName(conversation('???')), 'conversation-2026-11-28.md');
    assert.equal(exportFileName(conversation('x'.repeat(100))).length, 60 + '-2026-11-28.md'.length);
  });
});
