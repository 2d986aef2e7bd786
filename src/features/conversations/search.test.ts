// Issue 29: conversation search, GET /api/advisor/conversations?q=, through HTTP on a real database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { codeOf, type TestApp } from '../../../test/helpers/app.ts';
import type { OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { message, newUser, replyRow, send, startOf, userWithOpenAiKey, appOnOpenAiFake } from '../../../test/kits/conversations.ts';
import { searchDocument } from './repo.ts';
import type { ConversationListItemDto } from './schemas.ts';
import { searchTerms } from './search.ts';

type Page = { items: ConversationListItemDto[]; nextCursor: string | null };

describe('conversation search (issue 29)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  let close: () => Promise<void>;
  before(async () => ({ t, fake, close } = await appOnOpenAiFake()));
  after(() => close());

  async function converse(user: string, conversationId: string | null, text: string, reply: string): Promise<string> {
    fake.enqueueStream({ chunks: [reply] });
    const res = await send(t, user, conversationId, message(text));
    assert.equal(res.statusCode, 200, res.body);
    return String(startOf(res)['conversationId']);
  }
  const search = async (user: string, q: string, extra = '') => {
    const res = await t.call('GET', `/api/advisor/conversations?q=${encodeURIComponent(q)}${extra}`, { user });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<Page>();
  };
  const titles = (p: Page) => p.items.map((i) => i.title);

  /** `n` conversations of `user` straight in the database, the i-th titled `title(i)` and updated i minutes ago, each with its search document. */
  async function seed(user: string, n: number, title: (i: number) => string): Promise<void> {
    await sql`insert into users (id) values (${user}) on conflict do nothing`.execute(t.deps.db);
    const now = Date.now();
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      const at = new Date(now - i * 60_000);
      await sql`insert into conversations (id, user_id, title, provider, model, persona_id, message_count, last_message_at, created_at, updated_at)
        values (${id}, ${user}, ${title(i)}, 'openai', 'gpt-4o-mini', null, 0, ${at}, ${at}, ${at})`.execute(t.deps.db);
      await sql`insert into conversation_search (conversation_id, document) select ${id}::uuid, ${searchDocument(sql`${user}::text`, sql`${title(i)}::text`)}`.execute(
        t.deps.db,
      );
    }
  }

  describe('happy', () => {
    test('issue 29: ?q= lists only the caller’s conversations whose title or messages (the user’s and the advisor’s) hold every word — whole words, any case — newest first, as ConversationListItems', async () => {
      const user = await userWithOpenAiKey(t, fake.validKey, 'search');
      const earnings = await converse(user, null, 'Should I hold NVDA through earnings?', 'Size down before the report.');
      const stops = await converse(user, null, 'Where do I put my stop on AAPL?', 'Below the breakout level, with NVDA as a guide.');
      await converse(user, null, 'What is a covered call?', 'Selling a call against shares you own.');
      const other = await userWithOpenAiKey(t, fake.validKey, 'search-other');
      await converse(other, null, 'NVDA earnings again', 'Same answer.');

      assert.deepEqual(
        titles(await search(user, 'nvda')),
        ['Where do I put my stop on AAPL?', 'Should I hold NVDA through earnings?'],
        'a user message or a reply',
      );
      assert.deepEqual(
        (await search(user, 'EARNINGS')).items.map((i) => i.id),
        [earnings],
        'any case',
      );
      assert.deepEqual((await search(user, 'earn')).items, [], 'whole words: the start of one is not enough');
      assert.deepEqual(
        (await search(user, 'breakout nvda')).items.map((i) => i.id),
        [stops],
        'every word, in the advisor’s reply',
      );
      assert.deepEqual((await search(user, 'nvda covered')).items, [], 'every word must be there');
      const all = await search(user, 'nvda');
      const listed = (await t.call('GET', '/api/advisor/conversations', { user })).json<Page>();
      assert.deepEqual(
        all.items,
        listed.items.filter((i) => i.id === earnings || i.id === stops),
        'the same items as the list',
      );
    });

    test('issue 29: a later turn’s words are found from its end; a renamed conversation is found by its new title', async () => {
      const user = await userWithOpenAiKey(t, fake.validKey, 'search-later');
      const id = await converse(user, null, 'Hello', 'Hi there.');
      assert.deepEqual((await search(user, 'drawdown')).items, []);
      await converse(user, id, 'How deep was my drawdown in March?', 'About 8%.');
      assert.deepEqual(
        (await search(user, 'drawdown')).items.map((i) => i.id),
        [id],
      );
      const renamed = await t.call('PATCH', `/api/advisor/conversations/${id}`, { user, body: { title: 'Quarterly review' } });
      assert.equal(renamed.statusCode, 200, renamed.body);
      assert.deepEqual(
        (await search(user, 'quarterly')).items.map((i) => i.id),
        [id],
      );
    });

    test('issue 29: pages of a search follow the list’s cursors, whether the matches are among the newest conversations or only among older ones', async () => {
      const user = newUser('search-pages');
      // 260 conversations: every third one mentions TSLA; the 230 newest never mention SPY, the 30 oldest do.
      await seed(user, 260, (i) => `Trade ${i}${i % 3 === 0 ? ' TSLA' : ''}${i >= 230 ? ' SPY' : ''}`);
      for (const [q, expected] of [
        ['tsla', Array.from({ length: 260 }, (_, i) => i).filter((i) => i % 3 === 0)],
        ['spy', Array.from({ length: 30 }, (_, i) => 230 + i)],
        ['spy tsla', Array.from({ length: 30 }, (_, i) => 230 + i).filter((i) => i % 3 === 0)],
      ] as const) {
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const page: Page = await search(user, q, `&limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          seen.push(...titles(page));
          cursor = page.nextCursor;
        } while (cursor !== null);
        assert.deepEqual(
          seen.map((s) => Number(/^Trade (\d+)/.exec(s)?.[1])),
          [...expected],
          q,
        );
      }
    });
  });

  describe('bounds', () => {
    test('issue 29: a document near a tsvector’s 1 MB takes no more words (its size checked as stored: uncompressed, so even highly compressible words count whole), and the turn that brings them still ends stored and done', async () => {
      const user = await userWithOpenAiKey(t, fake.validKey, 'search-full');
      const id = await converse(user, null, 'Opening words', 'Kept words.');
      // 548 distinct words of 1,904 characters: 1,043,392 bytes of lexemes (a tsvector holds at most 1,048,575); compressed, a few KB.
      await sql`update conversation_search set document = (
          select strip(to_tsvector('simple', string_agg(g::text || repeat('x', 1900), ' '))) || ${sql`('u' || md5(${user}))::tsvector`}
            || to_tsvector('simple', 'opening words kept')
          from generate_series(1000, 1547) g)
        where conversation_id = ${id}::uuid`.execute(t.deps.db);
      const size = async () =>
        (
          await sql<{
            raw: number;
            stored: number;
          }>`select (select sum(length(lexeme))::int from unnest(document)) as raw, pg_column_size(document) as stored from conversation_search
            where conversation_id = ${id}::uuid`.execute(t.deps.db)
        ).rows[0];
      const before = await size();
      assert.ok(before !== undefined && before.raw > 1_040_000 && before.stored > before.raw, `stored uncompressed: ${JSON.stringify(before)}`);
      // Five new words of 2,000 characters: with them the document would pass a tsvector's 1 MB.
      const long = Array.from({ length: 5 }, (_, i) => `w${i}${'y'.repeat(1998)}`).join(' ');
      fake.enqueueStream({ chunks: ['Noted.'] });
      const res = await send(t, user, id, message(`${long} drawdown`));
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.frames.at(-1)?.event, 'done', 'the turn ends with its done frame, not an error');
      const reply = await replyRow(t, String(startOf(res)['assistantMessageId']));
      assert.equal(reply?.status, 'complete');
      assert.equal(reply?.content, 'Noted.');
      assert.deepEqual(await size(), before, 'the document took none of the turn’s words');
      assert.deepEqual(
        (await search(user, 'kept')).items.map((i) => i.id),
        [id],
        'the words it held are still found',
      );
    });
  });

  describe('errors', () => {
    test('issue 29: q of 0 or more than 200 characters → 400 VALIDATION_ERROR; a q without a letter or digit → 200, nothing found', async () => {
      const user = newUser('search-bad');
      for (const q of ['', 'x'.repeat(201)]) {
        const res = await t.call('GET', `/api/advisor/conversations?q=${q}`, { user });
        assert.equal(res.statusCode, 400, q);
        assert.equal(codeOf(res), 'VALIDATION_ERROR');
      }
      assert.deepEqual(await search(user, '?! -- &'), { items: [], nextCursor: null });
    });
  });

  describe('security', () => {
    test('issue 29: tsquery syntax in q is only letters and digits to the search (no operator, no error), and another user’s conversations are never found', async () => {
      const user = newUser('search-inject');
      await seed(user, 3, (i) => ['alpha beta', 'gamma', 'delta'][i] ?? '');
      for (const q of ['alpha | gamma', '!alpha', 'alph:*', "'alpha' & ''", 'alpha\\', '(alpha', 'alpha <-> beta']) {
        const res = await t.call('GET', `/api/advisor/conversations?q=${encodeURIComponent(q)}`, { user });
        assert.equal(res.statusCode, 200, `${q}: ${res.body}`);
      }
      assert.deepEqual(titles(await search(user, 'alpha | gamma')), [], 'the | is not an OR: both words are required');
      assert.deepEqual(titles(await search(user, '!alpha')), ['alpha beta'], 'the ! is not a NOT');
      assert.deepEqual(titles(await search(user, 'alph:*')), [], 'the :* is not a prefix');
      assert.deepEqual((await search(newUser('search-stranger'), 'alpha')).items, []);
    });

    test('issue 29: searchTerms — every word a required whole word, lower case, any script, at most 8 words of 64 characters; nothing without a word', () => {
      const table: [string, string | undefined][] = [
        ['AAPL', 'aapl'],
        ['stop loss', 'stop & loss'],
        ['BRK.B', 'brk & b'],
        ['gpt-4o mini', 'gpt & 4o & mini'],
        ['Übergröße 株価', 'übergröße & 株価'],
        ['a a A', 'a'],
        ["x' | y & !z:*", 'x & y & z'],
        ['1 2 3 4 5 6 7 8 9', '1 & 2 & 3 & 4 & 5 & 6 & 7 & 8'],
        ['?! --', undefined],
        [`${'w'.repeat(70)}`, `${'w'.repeat(64)}`],
      ];
      for (const [q, expected] of table) assert.equal(searchTerms(q), expected, q);
    });
  });
});
