import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { FastifySchema } from 'fastify';
import { codeOf, type TestApp } from '../../../test/helpers/app.ts';
import type { OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { createValidatorCompiler } from '../../http/validation.ts';
import { ConversationList, components, type ConversationListItemDto, type ConversationWithMessagesDto } from './schemas.ts';
import { IMAGES, image, message, newUser, send, startOf, userWithOpenAiKey, appOnOpenAiFake } from '../../../test/kits/conversations.ts';

type Page = { items: ConversationListItemDto[]; nextCursor: string | null };

describe('advisor conversations', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let close: () => Promise<void>;
  before(async () => ({ t, fake, close } = await appOnOpenAiFake()));
  after(() => close());

  const userWithKey = (tag: string): Promise<string> => userWithOpenAiKey(t, fake.validKey, tag);
  async function converse(user: string, conversationId: string | null, text = 'Hi', extra: Record<string, unknown> = {}): Promise<string> {
    const res = await send(t, user, conversationId, message(text, extra));
    assert.equal(res.statusCode, 200, res.body);
    return String(startOf(res)['conversationId']);
  }
  const list = async (user: string, query = '') => {
    const res = await t.call('GET', `/api/advisor/conversations${query}`, { user });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<Page>();
  };

  describe('happy', () => {
    test('DESIGN §7: a new conversation is listed with its ConversationListItem; the title is the first text, whitespace collapsed, cut at 80 characters', async () => {
      const user = await userWithKey('list');
      const text = `  Was   my\n\tentry on   NVDA too early?  ${'🙂'.repeat(40)} and then some more words`;
      const id = await converse(user, null, text, { personaId: 'coach' });
      const { items, nextCursor } = await list(user);
      assert.equal(nextCursor, null);
      assert.equal(items.length, 1);
      const item = items[0];
      assert.deepEqual(Object.keys(item ?? {}).sort(), [
        'createdAt',
        'id',
        'lastMessageAt',
        'messageCount',
        'model',
        'personaId',
        'provider',
        'title',
        'updatedAt',
      ]);
      const expected = [...text.replace(/\s+/g, ' ').trim()].slice(0, 80).join('');
      assert.deepEqual(
        [item?.id, item?.title, item?.provider, item?.model, item?.personaId, item?.messageCount],
        [id, expected, 'openai', 'gpt-4o-mini', 'coach', 2],
      );
      assert.equal([...(item?.title ?? '')].length, 80);
      // The list's timestamps (formatted by the database) read exactly as GET's (from Dates):
      // ISO 8601 in UTC, milliseconds truncated from the stored microseconds.
      await sql`update conversations set last_message_at = '2031-02-03T04:05:06.789999Z', created_at = '1999-12-31T23:59:59.000500+05:30' where id = ${id}`.execute(
        t.deps.db,
      );
      const listed = (await list(user)).items[0];
      const got = (await t.call('GET', `/api/advisor/conversations/${id}`, { user })).json<ConversationWithMessagesDto>();
      assert.deepEqual([listed?.lastMessageAt, listed?.createdAt], ['2031-02-03T04:05:06.789Z', '1999-12-31T18:29:59.000Z']);
      assert.deepEqual([listed?.lastMessageAt, listed?.createdAt, listed?.updatedAt], [got.lastMessageAt, got.createdAt, got.updatedAt]);
      // The page is written by the database, not by the response serializer: it must still be a ConversationList.
      const res = await t.call('GET', '/api/advisor/conversations?limit=1', { user });
      assert.match(String(res.headers['content-type']), /^application\/json; charset=utf-8$/);
      // The schema is a reference to a shared schema: the validator is given those it may name.
      const schema = { ...ConversationList, $defs: Object.fromEntries(components.map((s) => [s.$id, s])) };
      const validate = createValidatorCompiler()({ schema: schema as unknown as FastifySchema, method: 'GET', url: '/', httpPart: 'body' }) as (
        data: unknown,
      ) => boolean;
      assert.equal(validate(res.json()), true, res.body);
      const shown = Object.fromEntries(Object.entries(got).filter(([k]) => k !== 'messages' && k !== 'nextCursor'));
      assert.deepEqual(res.json(), { items: [shown], nextCursor: null }, 'the list item is the conversation GET shows');
    });

    test('spec 4.5: newest first by updatedAt; a new message moves its conversation to the top', async () => {
      const user = await userWithKey('order');
      const a = await converse(user, null, 'A');
      const b = await converse(user, null, 'B');
      assert.deepEqual(
        (await list(user)).items.map((i) => i.id),
        [b, a],
      );
      await converse(user, a, 'A again');
      const items = (await list(user)).items;
      assert.deepEqual(
        items.map((i) => [i.id, i.messageCount]),
        [
          [a, 4],
          [b, 2],
        ],
      );
    });

    test('spec 4.5: a cursor walk over 120 conversations sharing one (microsecond) updatedAt returns each exactly once, newest first', async () => {
      const user = newUser('walk');
      await t.call('GET', '/api/advisor/conversations', { user });
      const at = new Date('2030-01-01T00:00:00.123Z');
      const ids = Array.from({ length: 120 }, () => randomUUID());
      for (const id of ids) {
        await t.deps.db
          .insertInto('conversations')
          .values({
            id,
            user_id: user,
            title: id,
            provider: 'openai',
            model: 'gpt-4o-mini',
            persona_id: null,
            message_count: 0,
            last_message_at: at,
            created_at: at,
            updated_at: at,
          })
          .execute();
      }
      // Finer than a JS Date: a cursor that kept only milliseconds would skip or repeat rows.
      await sql`update conversations set updated_at = '2030-01-01T00:00:00.123456Z' where user_id = ${user}`.execute(t.deps.db);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: Page = await list(user, `?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        seen.push(...page.items.map((i) => i.id));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== null);
      assert.equal(pages, Math.ceil(120 / 7));
      assert.deepEqual(seen, [...ids].sort().reverse());
      assert.equal((await list(user)).items.length, 25, 'default limit');
      assert.equal((await list(user, '?limit=100')).items.length, 100);
    });

    test('DESIGN §7: GET a conversation → its messages newest last, paged backwards with a cursor; images listed and served to their owner', async () => {
      const user = await userWithKey('get');
      const id = await converse(user, null, 'one', { attachments: [image('png'), image('webp')] });
      await converse(user, id, 'two');
      await converse(user, id, 'three');
      const first = await t.call('GET', `/api/advisor/conversations/${id}?limit=4`, { user });
      assert.equal(first.statusCode, 200, first.body);
      const page1 = first.json<ConversationWithMessagesDto>();
      assert.equal(page1.messageCount, 6);
      assert.deepEqual(
        page1.messages.map((m) => [m.role, m.text]),
        [
          ['user', 'two'],
          ['assistant', 'Hello world'],
          ['user', 'three'],
          ['assistant', 'Hello world'],
        ],
      );
      assert.ok(page1.nextCursor);
      const page2 = (
        await t.call('GET', `/api/advisor/conversations/${id}?limit=4&cursor=${encodeURIComponent(page1.nextCursor)}`, { user })
      ).json<ConversationWithMessagesDto>();
      assert.deepEqual(
        page2.messages.map((m) => [m.role, m.text, m.status]),
        [
          ['user', 'one', 'complete'],
          ['assistant', 'Hello world', 'complete'],
        ],
      );
      assert.equal(page2.nextCursor, null);
      const reply = page2.messages[1];
      assert.deepEqual([reply?.finishReason, reply?.usage?.inputTokens, reply?.usage?.outputTokens, reply?.error], ['stop', 10, 2, null]);
      const attachments = page2.messages[0]?.attachments ?? [];
      assert.deepEqual(
        attachments.map((a) => [a.format, a.byteSize]),
        [
          ['png', IMAGES.png.length],
          ['webp', IMAGES.webp.length],
        ],
      );
      const png = await t.app.inject({ method: 'GET', url: attachments[0]?.url ?? '', headers: { authorization: `Bearer ${await t.token(user)}` } });
      assert.equal(png.statusCode, 200);
      assert.equal(png.headers['content-type'], 'image/png');
      assert.deepEqual(png.rawPayload, IMAGES.png);
    });

    test('PATCH title → 200 with the title (whitespace collapsed) and a new updatedAt', async () => {
      const user = await userWithKey('rename');
      const id = await converse(user, null);
      const before = (await list(user)).items[0];
      const res = await t.call('PATCH', `/api/advisor/conversations/${id}`, { user, body: { title: '  Swing   review ' } });
      assert.equal(res.statusCode, 200, res.body);
      const item = res.json<ConversationListItemDto>();
      assert.equal(item.title, 'Swing review');
      assert.ok(before && item.updatedAt >= before.updatedAt);
      assert.deepEqual((await list(user)).items[0], item);
    });

    test('DELETE → 204; the conversation, its messages and images are gone', async () => {
      const user = await userWithKey('delete');
      const id = await converse(user, null, 'bye', { attachments: [image('jpeg')] });
      const att = (await t.call('GET', `/api/advisor/conversations/${id}`, { user })).json<ConversationWithMessagesDto>().messages[0]?.attachments[0];
      assert.equal((await t.call('DELETE', `/api/advisor/conversations/${id}`, { user })).statusCode, 204);
      assert.equal(codeOf(await t.call('GET', `/api/advisor/conversations/${id}`, { user })), 'CONVERSATION_NOT_FOUND');
      assert.equal(codeOf(await t.call('GET', att?.url ?? '', { user })), 'ATTACHMENT_NOT_FOUND');
      const left = await t.deps.db.selectFrom('messages').select('id').where('conversation_id', '=', id).execute();
      assert.deepEqual(left, []);
      assert.deepEqual((await list(user)).items, []);
    });

    test('issue 29: GET …/{id} shows how each reply was paid — its start frame’s billing, charged; a turn that produced nothing returned (0 credits); none on a user message', async () => {
      const user = await userWithKey('paid');
      fake.enqueueStream({ chunks: ['Paid answer.'] });
      const first = await send(t, user, null, message('First'));
      const id = String(startOf(first)['conversationId']);
      const billing = startOf(first)['billing'] as { source: string; credits: number };
      fake.scriptStream({ status: 503 });
      try {
        assert.equal((await send(t, user, id, message('Second'))).statusCode, 200);
      } finally {
        fake.scriptStream({});
      }
      const got = (await t.call('GET', `/api/advisor/conversations/${id}`, { user })).json<ConversationWithMessagesDto>();
      assert.deepEqual(
        got.messages.map((m) => [m.role, m.status, m.billing]),
        [
          ['user', 'complete', null],
          ['assistant', 'complete', { ...billing, status: 'charged' }],
          ['user', 'complete', null],
          ['assistant', 'failed', { source: billing.source, credits: 0, status: 'returned' }],
        ],
      );
    });
  });

  describe('errors', () => {
    for (const limit of ['0', '101', 'abc', '-1', '2.5', '']) {
      test(`spec 4.5: limit=${limit} → 400 VALIDATION_ERROR`, async () => {
        const res = await t.call('GET', `/api/advisor/conversations?limit=${limit}`, { user: 'u-limit' });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR']);
      });
    }

    test("spec 4.5 / DESIGN §7: a cursor the service did not produce (garbage, tampered, another user's, another list's) → 400 VALIDATION_ERROR", async () => {
      const user = newUser('cursor');
      await t.call('GET', '/api/advisor/conversations', { user });
      const at = new Date('2030-01-01T00:00:00Z');
      for (let i = 0; i < 3; i++) {
        await t.deps.db
          .insertInto('conversations')
          .values({
            id: randomUUID(),
            user_id: user,
            title: 't',
            provider: 'openai',
            model: 'm',
            persona_id: null,
            message_count: 0,
            last_message_at: at,
            created_at: at,
            updated_at: at,
          })
          .execute();
      }
      const cursor = (await list(user, '?limit=1')).nextCursor ?? '';
      assert.ok(cursor);
      const flipped = cursor.slice(0, -2) + (cursor.at(-2) === 'A' ? 'B' : 'A') + cursor.at(-1);
      const otherUser = newUser('cursor-other');
      const bad = ['abc', 'x.y', `${cursor}x`, cursor.slice(0, 20), flipped, 'test1.' + Buffer.alloc(40).toString('base64url')];
      for (const c of bad) {
        const res = await t.call('GET', `/api/advisor/conversations?cursor=${encodeURIComponent(c)}`, { user });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], c);
      }
      const foreign = await t.call('GET', `/api/advisor/conversations?cursor=${encodeURIComponent(cursor)}`, { user: otherUser });
      assert.deepEqual([foreign.statusCode, codeOf(foreign)], [400, 'VALIDATION_ERROR'], "another user's cursor");
      const id = (await list(user)).items[0]?.id ?? '';
      const onMessages = await t.call('GET', `/api/advisor/conversations/${id}?cursor=${encodeURIComponent(cursor)}`, { user });
      assert.deepEqual([onMessages.statusCode, codeOf(onMessages)], [400, 'VALIDATION_ERROR'], "the list's cursor on a message page");
    });

    test('PATCH with an empty or whitespace title, or another field → 400 VALIDATION_ERROR, nothing changed', async () => {
      const user = await userWithKey('rename-bad');
      const id = await converse(user, null, 'keep me');
      for (const body of [{ title: '' }, { title: '   ' }, { title: 'x'.repeat(201) }, { title: 'ok', model: 'gpt-4o' }, {}]) {
        const res = await t.call('PATCH', `/api/advisor/conversations/${id}`, { user, body });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], JSON.stringify(body));
      }
      assert.equal((await list(user)).items[0]?.title, 'keep me');
    });

    test("DESIGN §2: another user's conversation or attachment → 404 on every route, and nothing changes", async () => {
      const owner = await userWithKey('owner');
      const id = await converse(owner, null, 'mine', { attachments: [image('png')] });
      const att = (await t.call('GET', `/api/advisor/conversations/${id}`, { user: owner })).json<ConversationWithMessagesDto>().messages[0]?.attachments[0];
      const intruder = await userWithKey('intruder');
      const calls: [string, 'GET' | 'PATCH' | 'DELETE' | 'POST', string, unknown, string][] = [
        ['get', 'GET', `/api/advisor/conversations/${id}`, undefined, 'CONVERSATION_NOT_FOUND'],
        ['rename', 'PATCH', `/api/advisor/conversations/${id}`, { title: 'theirs' }, 'CONVERSATION_NOT_FOUND'],
        ['delete', 'DELETE', `/api/advisor/conversations/${id}`, undefined, 'CONVERSATION_NOT_FOUND'],
        ['stream', 'POST', `/api/advisor/conversations/${id}/messages/stream`, message(), 'CONVERSATION_NOT_FOUND'],
        ['attachment', 'GET', att?.url ?? '', undefined, 'ATTACHMENT_NOT_FOUND'],
      ];
      for (const [what, method, url, body, code] of calls) {
        const res = await t.call(method, url, { user: intruder, ...(body === undefined ? {} : { body }) });
        assert.deepEqual([res.statusCode, codeOf(res)], [404, code], what);
        const missing = await t.call(method, url.replace(/[0-9a-f-]{36}/, randomUUID()), { user: intruder, ...(body === undefined ? {} : { body }) });
        assert.deepEqual([missing.statusCode, codeOf(missing)], [404, code], `${what} of a missing id`);
      }
      const still = (await t.call('GET', `/api/advisor/conversations/${id}`, { user: owner })).json<ConversationWithMessagesDto>();
      assert.deepEqual([still.title, still.messageCount], ['mine', 2]);
    });

    test('a malformed id → 400 VALIDATION_ERROR', async () => {
      for (const url of ['/api/advisor/conversations/not-a-uuid', '/api/advisor/attachments/123']) {
        const res = await t.call('GET', url, { user: 'u-bad-id' });
        assert.deepEqual([res.statusCode, codeOf(res)], [400, 'VALIDATION_ERROR'], url);
      }
    });
  });
});
