import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { StreamLeases } from '../../platform/stream-lease.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { gate } from '../../../test/helpers/events.ts';
import type { OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { startOpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import {
  countRows,
  image,
  IMAGES,
  message,
  newUser,
  saveKey,
  send,
  billingSpy,
  startOf,
  textOf,
  type BillingSpy,
  userWithOpenAiKey,
} from '../../../test/kits/conversations.ts';

const MAX_IMAGE_BYTES = 1000;

describe('advisor stream: checks, idempotency, limits', () => {
  let fake: OpenAiCompatibleFake;
  let deepseek: OpenAiCompatibleFake;
  let t: TestApp;
  let billing: BillingSpy;
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    deepseek = await startOpenAiCompatibleFake({ flavor: 'deepseek' });
    billing = billingSpy();
    t = await buildTestApp({
      env: { OPENAI_BASE_URL: fake.url, DEEPSEEK_BASE_URL: deepseek.url, MAX_IMAGE_BYTES: String(MAX_IMAGE_BYTES), CONTEXT_BUDGET_CHARS: '1000' },
      deps: { billing: billing.wrap },
    });
  });
  after(async () => {
    await t.close();
    await Promise.all([fake.close(), deepseek.close()]);
  });

  const userWithKey = (tag: string): Promise<string> => userWithOpenAiKey(t, fake.validKey, tag);

  describe('conversation context (DESIGN §7)', () => {
    test('an existing conversation keeps its provider and model; a new one follows the active key; its key gone → 409 PROVIDER_KEY_NOT_CONFIGURED', async () => {
      const user = await userWithKey('keeps');
      const conversationId = String(startOf(await send(t, user, null, message())).conversationId);
      await saveKey(t, user, 'deepseek', deepseek.validKey);
      const next = await send(t, user, conversationId, message());
      assert.deepEqual([startOf(next)['provider'], startOf(next)['model']], ['openai', 'gpt-4o-mini']);
      assert.deepEqual([startOf(await send(t, user, null, message())).provider], ['deepseek']);
      assert.equal((await t.call('DELETE', '/api/advisor/provider-keys/openai', { user })).statusCode, 204);
      const orphaned = await send(t, user, conversationId, message());
      assert.deepEqual([orphaned.statusCode, orphaned.code], [409, 'PROVIDER_KEY_NOT_CONFIGURED']);
    });

    test('history is trimmed oldest first to CONTEXT_BUDGET_CHARS and opens with a user turn; a personaId switches the persona', async () => {
      const user = await userWithKey('budget');
      const conversationId = String(startOf(await send(t, user, null, message('a'.repeat(400)))).conversationId);
      await send(t, user, conversationId, message('b'.repeat(400)));
      await send(t, user, conversationId, message('c'.repeat(400)));
      const seen = fake.streams.length;
      await send(t, user, conversationId, message('d', { personaId: 'coach' }));
      const body = fake.streams[seen]?.request.json as { messages: { role: string; content: string }[] };
      const coach = t.deps.config.catalogue.personas.find((p) => p.personaId === 'coach')?.systemPrompt;
      // 400 + 11 + 400 + 11 + 11 fit in 1000; the first question does not, and the reply left without it goes too.
      const [system, ...rest] = body.messages;
      assert.ok(system?.role === 'system' && system.content.endsWith(`\n\n${coach}`), system?.content);
      assert.deepEqual(rest, [
        { role: 'user', content: 'b'.repeat(400) },
        { role: 'assistant', content: 'Hello world' },
        { role: 'user', content: 'c'.repeat(400) },
        { role: 'assistant', content: 'Hello world' },
        { role: 'user', content: 'd' },
      ]);
      const item = (await t.call('GET', `/api/advisor/conversations/${conversationId}`, { user })).json<{ personaId: string }>();
      assert.equal(item.personaId, 'coach');
    });
  });

  describe('idempotency (DESIGN §7 clientMessageId)', () => {
    test('a retry after the turn finished replays the stored reply: same ids, no provider call, no new message, no new charge', async () => {
      const user = await userWithKey('replay');
      const body = message('Should I add to my winner?');
      fake.enqueueStream({ chunks: ['Only', ' with', ' a plan'], usage: { input: 5, output: 3 } });
      const first = await send(t, user, null, body);
      assert.equal(first.statusCode, 200);
      const [rows, streams, reserves] = [await countRows(t), fake.streams.length, billing.reserves.length];
      const again = await send(t, user, null, body);
      assert.equal(again.statusCode, 200, again.body);
      assert.deepEqual(startOf(again), startOf(first));
      assert.equal(textOf(again), 'Only with a plan');
      assert.deepEqual(again.frames.at(-1)?.data, first.frames.at(-1)?.data, 'the same done frame, usage included');
      assert.deepEqual([again.frames.at(-1)?.id, (again.frames.at(-1)?.data['usage'] as Record<string, unknown>)['inputTokens']], [3, 5]);
      assert.deepEqual([await countRows(t), fake.streams.length, billing.reserves.length], [rows, streams, reserves]);
    });

    test('a retry of a failed turn replays its error frame', async () => {
      const user = await userWithKey('replay-failed');
      const body = message();
      fake.enqueueStream({ chunks: ['Half'], errorAfterChunks: 1 });
      const first = await send(t, user, null, body);
      const again = await send(t, user, null, body);
      assert.deepEqual(
        again.frames.map((f) => f.event),
        ['start', 'delta', 'error'],
      );
      assert.deepEqual(again.frames.at(-1)?.data, first.frames.at(-1)?.data);
    });

    test('a retry while the first is still streaming → 409 STREAM_IN_PROGRESS', async () => {
      const user = await userWithKey('live');
      const body = message();
      fake.enqueueStream({ chunks: ['a', 'b', 'c'], delayMs: 150 });
      const seen = fake.streams.length;
      const first = send(t, user, null, body);
      await waitForStreams(fake, seen + 1);
      const again = await send(t, user, null, body);
      assert.deepEqual([again.statusCode, again.code], [409, 'STREAM_IN_PROGRESS']);
      assert.equal((await first).statusCode, 200);
    });

    test('the same id with different text → 409 CLIENT_MESSAGE_ID_REUSED, nothing stored', async () => {
      const user = await userWithKey('reused');
      const body = message('one');
      await send(t, user, null, body);
      const rows = await countRows(t);
      const other = await send(t, user, null, { ...body, text: 'two' });
      assert.deepEqual([other.statusCode, other.code], [409, 'CLIENT_MESSAGE_ID_REUSED']);
      const elsewhere = await send(t, user, String(startOf(await send(t, user, null, message())).conversationId), body);
      assert.deepEqual([elsewhere.statusCode, elsewhere.code], [409, 'CLIENT_MESSAGE_ID_REUSED'], 'same text, other conversation');
      assert.equal((await countRows(t)).messages, rows.messages + 2);
    });

    test('concurrent duplicates: exactly one turn starts (unique index), the others → 409 STREAM_IN_PROGRESS', async () => {
      const user = await userWithKey('dup');
      const body = message();
      // The turn that starts holds its stream open until the nine others have answered (not for a time a busy
      // machine could outlast, after which a late duplicate would find the turn ended and get its replay).
      const othersAnswered = gate();
      fake.scriptStream({ chunks: ['x', 'y'], hold: { afterChunks: 1, until: othersAnswered.opened } });
      const before = await countRows(t);
      let answered = 0;
      const all = await Promise.all(
        Array.from({ length: 10 }, () =>
          send(t, user, null, body).then((r) => {
            if (r.statusCode !== 200 && ++answered === 9) othersAnswered.open();
            return r;
          }),
        ),
      );
      fake.scriptStream({});
      assert.deepEqual(all.map((r) => r.statusCode).sort(), [200, ...Array<number>(9).fill(409)]);
      assert.ok(all.filter((r) => r.statusCode === 409).every((r) => r.code === 'STREAM_IN_PROGRESS'));
      assert.equal((await countRows(t)).messages, before.messages + 2);
    });
  });

  describe('refusals store nothing, hold no lease, reserve nothing, call no provider (DESIGN §3)', () => {
    async function refused(user: string, conversationId: string | null, body: unknown, status: number, code: string): Promise<void> {
      const [rows, streams, reserves] = [await countRows(t), fake.streams.length + deepseek.streams.length, billing.reserves.length];
      const res = await send(t, user, conversationId, body);
      assert.deepEqual([res.statusCode, res.code], [status, code], res.body);
      assert.deepEqual(await countRows(t), rows);
      assert.equal(fake.streams.length + deepseek.streams.length, streams);
      assert.equal(billing.reserves.length, reserves);
      const lease = await t.deps.leases.acquire(user, 1000);
      assert.ok(lease, 'no lease is left behind');
      await t.deps.leases.release(user, lease);
    }

    const schemaCases: [string, Record<string, unknown>][] = [
      ['empty text', { text: '' }],
      ['text over 50000 characters', { text: 'x'.repeat(50_001) }],
      ['clientMessageId not a uuid', { clientMessageId: 'abc' }],
      ['an unknown field', { model: 'gpt-4o' }],
      ['five attachments', { attachments: Array.from({ length: 5 }, () => image('png')) }],
      ['a gif', { attachments: [{ type: 'image', format: 'gif', dataBase64: IMAGES.png.toString('base64') }] }],
      ['a non-image attachment', { attachments: [{ type: 'file', format: 'png', dataBase64: IMAGES.png.toString('base64') }] }],
      ['dataBase64 over 4500000 characters', { attachments: [{ type: 'image', format: 'png', dataBase64: 'A'.repeat(4_500_004) }] }],
      ['whitespace-only text', { text: ' \n\t ' }],
      ['an unknown personaId', { personaId: 'oracle' }],
    ];
    for (const [what, patch] of schemaCases) {
      test(`spec 2.3: ${what} → 400 VALIDATION_ERROR`, async () => {
        await refused(await userWithKey('schema'), null, { ...message(), ...patch }, 400, 'VALIDATION_ERROR');
      });
    }

    test('spec 2.3: a missing clientMessageId → 400 VALIDATION_ERROR', async () => {
      await refused(await userWithKey('schema'), null, { text: 'hi' }, 400, 'VALIDATION_ERROR');
    });

    test('DESIGN §7: base64 that does not decode → 400 IMAGE_INVALID', async () => {
      for (const bad of ['!!!!', 'iVBORw0KGgo$AAAA', 'abcde']) {
        await refused(
          await userWithKey('b64'),
          null,
          message('look', { attachments: [{ type: 'image', format: 'png', dataBase64: bad }] }),
          400,
          'IMAGE_INVALID',
        );
      }
    });

    test('DESIGN §7: bytes that are not the declared format → 400 IMAGE_INVALID', async () => {
      const user = await userWithKey('magic');
      await refused(user, null, message('look', { attachments: [image('png', IMAGES.jpeg)] }), 400, 'IMAGE_INVALID');
      await refused(user, null, message('look', { attachments: [image('png'), image('webp', IMAGES.png)] }), 400, 'IMAGE_INVALID');
      await refused(user, null, message('look', { attachments: [image('jpeg', Buffer.from('plain text, not a picture'))] }), 400, 'IMAGE_INVALID');
    });

    test('DESIGN §7: an image above MAX_IMAGE_BYTES → 413 IMAGE_TOO_LARGE', async () => {
      const big = Buffer.concat([IMAGES.png, Buffer.alloc(MAX_IMAGE_BYTES)]);
      await refused(await userWithKey('big'), null, message('look', { attachments: [image('png', big)] }), 413, 'IMAGE_TOO_LARGE');
    });

    test('DESIGN §7: a body above MAX_BODY_BYTES → 413 PAYLOAD_TOO_LARGE', async () => {
      const body = JSON.stringify({ ...message(), pad: 'x'.repeat(t.deps.config.maxBodyBytes) });
      await refused(await userWithKey('body'), null, body, 413, 'PAYLOAD_TOO_LARGE');
    });

    test('DESIGN §7: a model that takes no images → 400 IMAGES_NOT_SUPPORTED (text-only still works)', async () => {
      const user = newUser('noimg');
      await saveKey(t, user, 'deepseek', deepseek.validKey);
      await refused(user, null, message('look', { attachments: [image('png')] }), 400, 'IMAGES_NOT_SUPPORTED');
      assert.equal((await send(t, user, null, message())).statusCode, 200);
    });

    test('DESIGN §6: no active provider key → 409 PROVIDER_KEY_NOT_CONFIGURED', async () => {
      await refused(newUser('nokey'), null, message(), 409, 'PROVIDER_KEY_NOT_CONFIGURED');
    });

    test('DESIGN §5: a stored key that no longer decrypts → 409 PROVIDER_KEY_DECRYPTION_FAILED', async () => {
      const user = await userWithKey('decrypt');
      await sql`update provider_keys set tag = ${Buffer.alloc(16)} where user_id = ${user}`.execute(t.deps.db);
      await refused(user, null, message(), 409, 'PROVIDER_KEY_DECRYPTION_FAILED');
    });

    test('DESIGN §5: a key that stops decrypting after this instance opened it for a turn → 409 PROVIDER_KEY_DECRYPTION_FAILED, nothing reserved or stored', async () => {
      const user = await userWithKey('decrypt-later');
      const first = await send(t, user, null, message());
      assert.equal(first.frames.at(-1)?.event, 'done', first.body);
      // The instance remembers the key's sealed bytes; the start statement compares them with the stored ones.
      await sql`update provider_keys set tag = ${Buffer.alloc(16)} where user_id = ${user}`.execute(t.deps.db);
      await refused(user, null, message(), 409, 'PROVIDER_KEY_DECRYPTION_FAILED');
    });

    test('DESIGN §6: a key saved again after this instance read the old one → the next turn starts on the new one', async () => {
      const user = await userWithKey('resaved');
      assert.equal((await send(t, user, null, message())).statusCode, 200);
      await saveKey(t, user, 'openai', fake.validKey, 'gpt-4.1-mini');
      const next = await send(t, user, null, message());
      assert.equal(next.frames.at(-1)?.event, 'done', next.body);
      assert.equal(startOf(next)['model'], 'gpt-4.1-mini', 'the key as saved now, with its default model');
    });

    test('DESIGN §8: a billing refusal (model not in the catalogue → 402 MODEL_NOT_AVAILABLE) leaves nothing behind', async () => {
      const user = newUser('bill');
      await saveKey(t, user, 'openai', fake.validKey, 'dall-e-3');
      const rows = await countRows(t);
      const res = await send(t, user, null, message());
      assert.deepEqual([res.statusCode, res.code], [402, 'MODEL_NOT_AVAILABLE']);
      assert.deepEqual(await countRows(t), rows);
      assert.equal(billing.settles.filter((s) => s.charge.userId === user).length, 0);
    });

    test("DESIGN §2: an unknown conversation, or another user's → 404 CONVERSATION_NOT_FOUND", async () => {
      const owner = await userWithKey('owner');
      const theirs = String(startOf(await send(t, owner, null, message())).conversationId);
      const intruder = await userWithKey('intruder');
      await refused(intruder, theirs, message(), 404, 'CONVERSATION_NOT_FOUND');
      await refused(intruder, randomUUID(), message(), 404, 'CONVERSATION_NOT_FOUND');
    });
  });

  test('DESIGN §4: 30 messages per rolling 60 s per user, whatever their outcome, new and existing together → 429 RATE_LIMITED', async () => {
    const user = await userWithKey('rate');
    const ok = await send(t, user, null, message());
    const conversationId = String(startOf(ok).conversationId);
    for (let i = 1; i < 30; i++) {
      const res = await send(t, user, i % 2 ? conversationId : null, { text: '' });
      assert.equal(res.statusCode, 400, `request ${i + 1}`);
    }
    const limited = await send(t, user, conversationId, message());
    assert.deepEqual([limited.statusCode, limited.code], [429, 'RATE_LIMITED']);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.match(String(limited.headers['ratelimit-policy']), /"advisor-messages";q=30;w=60/);
    assert.equal((await send(t, newUser('other'), null, { text: '' })).statusCode, 400, 'another user is not limited');
  });

  test('DESIGN §4: once the limit is reached, 429 RATE_LIMITED outranks every other refusal and reads nothing', async () => {
    const user = await userWithKey('rate-first');
    const first = message();
    const ok = await send(t, user, null, first);
    const conversationId = String(startOf(ok).conversationId);
    for (let i = 1; i < 30; i++) assert.equal((await send(t, user, null, { text: '' })).statusCode, 400, `request ${i + 1}`);
    const before = fake.streams.length;
    const cases: [string, string | null, unknown][] = [
      ['a valid message', conversationId, message()],
      ['a schema failure', null, { text: '' }],
      ['whitespace-only text', null, message('   ')],
      ['an unknown conversation', randomUUID(), message()],
      ['a reused clientMessageId', null, { ...message('other text'), clientMessageId: first['clientMessageId'] }],
      // Above the size read while the verdict is pending: the verdict comes first, the body is not parsed.
      ['a large body that is not JSON', null, `{"text":"${'x'.repeat(100_000)}`],
      ['a body above MAX_BODY_BYTES', null, JSON.stringify({ ...message(), pad: 'x'.repeat(t.deps.config.maxBodyBytes) })],
    ];
    for (const [what, target, body] of cases) {
      const res = await send(t, user, target, body);
      assert.deepEqual([res.statusCode, res.code], [429, 'RATE_LIMITED'], what);
      assert.ok(Number(res.headers['retry-after']) >= 1, what);
    }
    assert.equal(fake.streams.length, before, 'no provider called');
    const token = await t.deps.leases.acquire(user, 1000);
    assert.notEqual(token, null, 'no lease held');
    if (token !== null) await t.deps.leases.release(user, token);
  });

  test('DESIGN §4: 20 concurrent stream starts of one user across two instances → one 200, 19 × 409 STREAM_IN_PROGRESS', async () => {
    const second = await buildTestApp({ shareWith: t, env: { OPENAI_BASE_URL: fake.url } });
    try {
      const user = await userWithKey('race');
      fake.scriptStream({ chunks: ['slow', ' answer'], delayMs: 300 });
      const all = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i % 2 ? second : t, user, null, message())));
      fake.scriptStream({});
      assert.deepEqual(all.map((r) => r.statusCode).sort(), [200, ...Array<number>(19).fill(409)]);
      assert.ok(all.filter((r) => r.statusCode === 409).every((r) => r.code === 'STREAM_IN_PROGRESS'));
      assert.equal((await send(t, user, null, message())).statusCode, 200, 'the lease is free once the stream ended');
    } finally {
      await second.close();
    }
  });
});

describe('advisor stream: the database fences one live turn per user (DESIGN §12 under faults)', () => {
  test('DESIGN §12: 20 concurrent stream starts of one user across two instances whose lease store grants every lease (as one restarted empty does) → exactly one 200, 19 × 409 STREAM_IN_PROGRESS; nothing of the refused stored or charged', async () => {
    const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    // Every acquire succeeds and no lease is ever refused: only the database stands between two turns.
    const forgetful = (real: StreamLeases): StreamLeases => ({
      ...real,
      acquire: async () => randomUUID(),
      renew: async () => true,
      release: async () => undefined,
    });
    const one = await buildTestApp({ env: { OPENAI_BASE_URL: fake.url }, deps: { leases: forgetful } });
    const two = await buildTestApp({ shareWith: one, env: { OPENAI_BASE_URL: fake.url }, deps: { leases: forgetful } });
    try {
      const user = await userWithOpenAiKey(one, fake.validKey, 'fence');
      fake.scriptStream({ chunks: ['slow', ' answer'], delayMs: 300 });
      const all = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i % 2 ? two : one, user, null, message())));
      fake.scriptStream({});
      assert.deepEqual(all.map((r) => `${r.statusCode} ${r.code ?? ''}`.trim()).sort(), ['200', ...Array<string>(19).fill('409 STREAM_IN_PROGRESS')]);
      const stored = await one.deps.db.selectFrom('messages').select('role').where('user_id', '=', user).execute();
      assert.equal(stored.length, 2, 'one user message and one reply');
      const charges = await one.deps.db.selectFrom('turn_charges').select('status').where('user_id', '=', user).execute();
      assert.deepEqual(
        charges.map((c) => c.status),
        ['charged'],
      );
      assert.equal((await send(two, user, null, message())).statusCode, 200, 'the next turn starts once the first ended');
    } finally {
      await two.close();
      await one.close();
      await fake.close();
    }
  });
});

async function waitForStreams(fake: OpenAiCompatibleFake, n: number): Promise<void> {
  while (fake.streams.length < n) await new Promise((r) => setTimeout(r, 5));
}
