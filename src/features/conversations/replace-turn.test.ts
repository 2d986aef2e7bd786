// Issue 29: regenerate the last reply and edit the last message — a turn that `replaces` the
// conversation's last turn, through HTTP on a real database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestApp } from '../../../test/helpers/app.ts';
import type { OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { giveCredits } from '../../../test/kits/billing.ts';
import { IMAGES, countRows, image, message, newUser, saveKey, send, startOf, userWithOpenAiKey, appOnOpenAiFake } from '../../../test/kits/conversations.ts';
import type { ConversationWithMessagesDto } from './schemas.ts';

type Sent = { role: string; content: unknown }[];

describe('a turn that replaces the last one (issue 29)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let close: () => Promise<void>;
  before(async () => ({ t, fake, close } = await appOnOpenAiFake()));
  after(() => close());

  async function turn(user: string, conversationId: string | null, text: string, reply: string, extra: Record<string, unknown> = {}) {
    fake.enqueueStream({ chunks: [reply] });
    const res = await send(t, user, conversationId, message(text, extra));
    assert.equal(res.statusCode, 200, res.body);
    return { id: String(startOf(res)['conversationId']), userMessageId: String(startOf(res)['userMessageId']) };
  }
  const conversation = async (user: string, id: string) =>
    (await t.call('GET', `/api/advisor/conversations/${id}`, { user })).json<ConversationWithMessagesDto>();
  const shown = (c: ConversationWithMessagesDto) => c.messages.map((m) => [m.role, m.text]);

  describe('happy', () => {
    test('issue 29: regenerate — the same text replacing the last turn: its reply gives way to the new one, the numbers stay, and the model is not sent the replaced turn', async () => {
      const user = await userWithOpenAiKey(t, fake.validKey, 'regen');
      const { id } = await turn(user, null, 'First question', 'First answer.');
      const last = await turn(user, id, 'Second question', 'A weak answer.');
      await turn(user, id, 'Second question', 'A better answer.', { replaces: last.userMessageId });
      const c = await conversation(user, id);
      assert.deepEqual(shown(c), [
        ['user', 'First question'],
        ['assistant', 'First answer.'],
        ['user', 'Second question'],
        ['assistant', 'A better answer.'],
      ]);
      assert.equal(c.messageCount, 4);
      const sent = (fake.streams.at(-1)?.request.json as { messages: Sent }).messages.filter((m) => m.role !== 'system');
      assert.deepEqual(
        sent.map((m) => [m.role, JSON.stringify(m.content)]),
        [
          ['user', '"First question"'],
          ['assistant', '"First answer."'],
          ['user', '"Second question"'],
        ],
        'the weak answer is not part of the context',
      );
      assert.equal((await t.call('GET', `/api/advisor/conversations?q=better`, { user })).json<{ items: unknown[] }>().items.length, 1);
    });

    test('issue 29: edit — new text replacing the only turn: the images of the replaced message go with it, and a title that was that message follows the edit', async () => {
      const user = await userWithOpenAiKey(t, fake.validKey, 'edit');
      const first = await turn(user, null, 'Is AAPL overbought?', 'Maybe.', { attachments: [image('png', IMAGES.png)] });
      const before = await countRows(t);
      await turn(user, first.id, 'Is MSFT overbought?', 'Not by RSI.', { replaces: first.userMessageId });
      const c = await conversation(user, first.id);
      assert.deepEqual(shown(c), [
        ['user', 'Is MSFT overbought?'],
        ['assistant', 'Not by RSI.'],
      ]);
      assert.equal(c.title, 'Is MSFT overbought?');
      assert.deepEqual(c.messages[0]?.attachments, []);
      const after = await countRows(t);
      assert.deepEqual([after.messages - before.messages, after.attachments - before.attachments], [0, -1]);
      const renamed = await t.call('PATCH', `/api/advisor/conversations/${first.id}`, { user, body: { title: 'My own title' } });
      assert.equal(renamed.statusCode, 200);
      const again = (await conversation(user, first.id)).messages[0]?.id ?? '';
      await turn(user, first.id, 'Is NVDA overbought?', 'Yes.', { replaces: again });
      assert.equal((await conversation(user, first.id)).title, 'My own title', 'a title the user chose stays');
    });
  });

  describe('errors', () => {
    test('issue 29: replaces naming an earlier message, a reply, or any message on a new conversation → 400 VALIDATION_ERROR; nothing stored, no provider call', async () => {
      const user = await userWithOpenAiKey(t, fake.validKey, 'replace-bad');
      const first = await turn(user, null, 'One', 'Uno.');
      await turn(user, first.id, 'Two', 'Dos.');
      const reply = (await conversation(user, first.id)).messages.at(-1)?.id;
      const calls = fake.streams.length;
      const rows = await countRows(t);
      for (const [target, replaces] of [
        [first.id, first.userMessageId],
        [first.id, reply],
        [null, first.userMessageId],
      ] as const) {
        const res = await send(t, user, target, message('Again', { replaces }));
        assert.equal(res.statusCode, 400, `${target} ${replaces}: ${res.body}`);
        assert.equal(res.code, 'VALIDATION_ERROR');
      }
      assert.equal(fake.streams.length, calls);
      assert.deepEqual(await countRows(t), rows);
    });

    test('issue 29: a replacing turn the billing refuses (402 INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE) changes nothing: the replaced turn is still there', async () => {
      const user = newUser('replace-refused');
      await saveKey(t, user, 'openai', fake.validKey, 'gpt-4o');
      await giveCredits(t, user, 5);
      const first = await turn(user, null, 'Paid question', 'Paid answer.');
      const res = await send(t, user, first.id, message('Paid question', { replaces: first.userMessageId }));
      assert.equal(res.statusCode, 402, res.body);
      assert.equal(res.code, 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE');
      assert.deepEqual(shown(await conversation(user, first.id)), [
        ['user', 'Paid question'],
        ['assistant', 'Paid answer.'],
      ]);
    });
  });

  describe('security', () => {
    test('issue 29: another user’s message id in replaces → 400 VALIDATION_ERROR (it is not this conversation’s), nothing of theirs removed', async () => {
      const owner = await userWithOpenAiKey(t, fake.validKey, 'replace-owner');
      const theirs = await turn(owner, null, 'Mine', 'Yours.');
      const mallory = await userWithOpenAiKey(t, fake.validKey, 'replace-mallory');
      const own = await turn(mallory, null, 'Hello', 'Hi.');
      const res = await send(t, mallory, own.id, message('Gone?', { replaces: theirs.userMessageId }));
      assert.equal(res.statusCode, 400);
      assert.equal(res.code, 'VALIDATION_ERROR');
      assert.equal((await conversation(owner, theirs.id)).messages.length, 2);
    });
  });
});
