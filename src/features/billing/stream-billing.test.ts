import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { buildTestApp, codeOf, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { startOpenAiCompatibleFake, type OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { createTurnBilling, type TurnBilling } from './turn-billing.ts';
import { assertLedgerInvariant, giveCredits, ledgerCount, turnStatus, writeTestCatalogue } from '../../../test/kits/billing.ts';
import { migratedEmbeddedDb } from '../../../test/helpers/pglite-template.ts';

const STREAM = '/api/advisor/conversations/new/messages/stream';
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

type Frame = { event: string; data: Record<string, unknown> };

function frames(body: string): Frame[] {
  return body
    .split('\n\n')
    .map((block) => {
      const event = /^event: (.+)$/m.exec(block)?.[1];
      const data = /^data: (.+)$/m.exec(block)?.[1];
      return event && data ? { event, data: JSON.parse(data) as Record<string, unknown> } : undefined;
    })
    .filter((f): f is Frame => f !== undefined);
}

describe('billing through the advisor stream (DESIGN §7, §8)', () => {
  let t: TestApp;
  let openai: OpenAiCompatibleFake;
  const clock = new ManualClock(new Date('2030-09-10T09:00:00Z'));
  // The app's billing is its real one, wrapped so a test can delay its statement or put it on a dead store.
  let beforeStore: (() => Promise<void>) | undefined;
  let billingOverride: TurnBilling | undefined;
  const switchable = (real: TurnBilling): TurnBilling => ({
    reserve: (req, store) =>
      (billingOverride ?? real).reserve(req, async (db, reservation) => {
        await beforeStore?.();
        return store(db, reservation);
      }),
    reserveWithin: (req, store) =>
      (billingOverride ?? real).reserveWithin(req, async (db, reservation) => {
        await beforeStore?.();
        return store(db, reservation);
      }),
    settle: (charge, produced, store) => (billingOverride ?? real).settle(charge, produced, store),
  });
  before(async () => {
    openai = await startOpenAiCompatibleFake({ flavor: 'openai', models: ['cheap-1', 'big-1', 'mystery-1'] });
    t = await buildTestApp({ clock, env: { CONFIG_FILE: writeTestCatalogue(), OPENAI_BASE_URL: openai.url }, deps: { billing: switchable } });
  });
  after(async () => {
    await t.close();
    await openai.close();
  });

  async function userWithKey(model: string, credits = 0): Promise<string> {
    const u = `u-${randomUUID()}`;
    const saved = await t.call('PUT', '/api/advisor/provider-keys/openai', { user: u, body: { apiKey: openai.validKey, defaultModel: model } });
    assert.equal(saved.statusCode, 200, saved.body);
    if (credits > 0) await giveCredits(t, u, credits);
    return u;
  }
  const useModel = async (u: string, model: string) =>
    assert.equal((await t.call('PATCH', '/api/advisor/provider-keys/openai', { user: u, body: { defaultModel: model } })).statusCode, 200);
  const send = (u: string, images = 0) => {
    clock.advance(2500); // stays under the 30-per-minute stream limit
    return t.call('POST', STREAM, {
      user: u,
      body: {
        text: 'How was my week?',
        clientMessageId: randomUUID(),
        ...(images > 0 ? { attachments: Array.from({ length: images }, () => ({ type: 'image', format: 'png', dataBase64: PNG })) } : {}),
      },
    });
  };
  const conversationCount = async (u: string) => (await t.call('GET', '/api/advisor/conversations', { user: u })).json<{ items: unknown[] }>().items.length;

  async function refusedStream(u: string, code: string, status: number, images = 0): Promise<void> {
    const [entries, conversations, streams] = [await ledgerCount(t, u), await conversationCount(u), openai.streams.length];
    const res = await send(u, images);
    assert.equal(res.statusCode, status, res.body);
    assert.equal(codeOf(res), code);
    // DESIGN §3: a refused request charges nothing, stores nothing and calls no provider.
    assert.deepEqual([await ledgerCount(t, u), await conversationCount(u), openai.streams.length], [entries, conversations, streams]);
    await assertLedgerInvariant(t, u);
  }

  test('a paid turn: the start frame carries billing {credits, creditsPerTurn}; the ledger holds turn:<assistantMessageId>', async () => {
    const u = await userWithKey('big-1', 12);
    const res = await send(u);
    assert.equal(res.statusCode, 200, res.body);
    const [start, ...rest] = frames(res.body);
    assert.equal(start?.event, 'start');
    assert.deepEqual(start.data['billing'], { source: 'credits', credits: 5 });
    assert.equal(rest.at(-1)?.event, 'done');
    const turnId = String(start.data['assistantMessageId']);
    const ledger = (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { amount: number; reference: string }[] }>();
    assert.deepEqual(ledger.items[0], { ...ledger.items[0], amount: -5, reference: `turn:${turnId}` });
    assert.equal(await turnStatus(t, turnId), 'charged');
    assert.equal(await assertLedgerInvariant(t, u), 7);
  });

  test('an allowance model is paid from the allowance first: billing {allowance, 0}', async () => {
    const u = await userWithKey('cheap-1', 10);
    const start = frames((await send(u)).body)[0];
    assert.deepEqual(start?.data['billing'], { source: 'allowance', credits: 0 });
    assert.equal(await assertLedgerInvariant(t, u), 10);
  });

  test('no delta produced (provider fails first) → the credits come back with a turn-return entry', async () => {
    const u = await userWithKey('big-1', 10);
    openai.enqueueStream({ status: 500 });
    const res = await send(u);
    assert.equal(res.statusCode, 200);
    const sent = frames(res.body);
    assert.deepEqual(
      sent.map((f) => f.event),
      ['start', 'error'],
    );
    assert.deepEqual(sent[0]?.data['billing'], { source: 'credits', credits: 5 });
    const turnId = String(sent[0]?.data['assistantMessageId']);
    assert.equal(await turnStatus(t, turnId), 'returned');
    const ledger = (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { amount: number; reference: string }[] }>();
    assert.deepEqual(
      ledger.items.slice(0, 2).map((i) => [i.reference, i.amount]),
      [
        [`turn-return:${turnId}`, 5],
        [`turn:${turnId}`, -5],
      ],
    );
    assert.equal(await assertLedgerInvariant(t, u), 10);
  });

  describe("the turn's rows and its reservation are stored by one statement: both or neither", () => {
    /** Runs `work` with billing's statement delayed until `meanwhile` has happened (a race lost on purpose). */
    async function racing(meanwhile: () => Promise<void>, work: () => Promise<void>): Promise<void> {
      beforeStore = meanwhile;
      try {
        await work();
      } finally {
        beforeStore = undefined;
      }
    }
    const charges = async (u: string) => (await t.deps.db.selectFrom('turn_charges').select('turn_id').where('user_id', '=', u).execute()).length;

    test('a conversation deleted after the checks → 404 CONVERSATION_NOT_FOUND; nothing reserved, charged or stored', async () => {
      const u = await userWithKey('big-1', 12);
      const first = frames((await send(u)).body)[0];
      const conversationId = String(first?.data['conversationId']);
      const [entries, turns, streams] = [await ledgerCount(t, u), await charges(u), openai.streams.length];
      await racing(
        async () => void (await t.deps.db.deleteFrom('conversations').where('id', '=', conversationId).execute()),
        async () => {
          clock.advance(2500);
          const res = await t.call('POST', `/api/advisor/conversations/${conversationId}/messages/stream`, {
            user: u,
            body: { text: 'And this week?', clientMessageId: randomUUID() },
          });
          assert.equal(res.statusCode, 404, res.body);
          assert.equal(codeOf(res), 'CONVERSATION_NOT_FOUND');
        },
      );
      assert.deepEqual([await ledgerCount(t, u), await charges(u), openai.streams.length], [entries, turns, streams]);
      assert.equal(await conversationCount(u), 0);
      assert.equal(await assertLedgerInvariant(t, u), 7);
    });

    test('a duplicate clientMessageId stored meanwhile (the unique index decides) → its turn is replayed; nothing reserved or charged', async () => {
      const u = await userWithKey('big-1', 12);
      const clientMessageId = randomUUID();
      const text = 'How was my week?';
      const [conversationId, userMessageId, replyId] = [randomUUID(), randomUUID(), randomUUID()];
      const [entries, streams] = [await ledgerCount(t, u), openai.streams.length];
      await racing(
        async () => {
          // Another instance started and finished the same message in between.
          await sql`insert into conversations (id, user_id, title, provider, model, persona_id, message_count, last_message_at, created_at, updated_at)
            values (${conversationId}, ${u}, ${text}, 'openai', 'big-1', null, 2, now(), now(), now())`.execute(t.deps.db);
          await sql`insert into messages (id, conversation_id, user_id, seq, role, content, status, client_message_id, finish_reason,
              billing_source, billing_credits, created_at, completed_at)
            values (${userMessageId}, ${conversationId}, ${u}, 1, 'user', ${text}, 'complete', ${clientMessageId}, null, null, null, now(), null),
                   (${replyId}, ${conversationId}, ${u}, 2, 'assistant', 'Calm and steady.', 'complete', null, 'stop', 'credits', 5, now(), now())`.execute(
            t.deps.db,
          );
        },
        async () => {
          clock.advance(2500);
          const res = await t.call('POST', STREAM, { user: u, body: { text, clientMessageId } });
          assert.equal(res.statusCode, 200, res.body);
          const sent = frames(res.body);
          assert.deepEqual(
            sent.map((f) => f.event),
            ['start', 'delta', 'done'],
          );
          assert.deepEqual(
            [sent[0]?.data['conversationId'], sent[0]?.data['assistantMessageId'], sent[1]?.data['text']],
            [conversationId, replyId, 'Calm and steady.'],
          );
          assert.deepEqual(sent[0]?.data['billing'], { source: 'credits', credits: 5 });
        },
      );
      assert.deepEqual([await ledgerCount(t, u), await charges(u), openai.streams.length], [entries, 0, streams]);
      assert.equal(await assertLedgerInvariant(t, u), 12);
    });
  });

  describe('each refusal through the stream route, by its exact condition', () => {
    test('402 MODEL_NOT_AVAILABLE: the key’s model is not in the catalogue', async () => {
      const u = await userWithKey('mystery-1', 50);
      await refusedStream(u, 'MODEL_NOT_AVAILABLE', 402);
    });

    test('402 INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE, then ALLOWANCE_EXHAUSTED, then INSUFFICIENT_CREDITS', async () => {
      const u = await userWithKey('big-1', 4);
      await refusedStream(u, 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', 402);
      await useModel(u, 'cheap-1');
      assert.equal((await send(u)).statusCode, 200);
      assert.equal((await send(u)).statusCode, 200);
      const third = frames((await send(u)).body)[0];
      assert.deepEqual(third?.data['billing'], { source: 'credits', credits: 1 });
      for (let i = 0; i < 3; i++) assert.equal((await send(u)).statusCode, 200);
      await refusedStream(u, 'ALLOWANCE_EXHAUSTED', 402);
      await useModel(u, 'big-1');
      await refusedStream(u, 'INSUFFICIENT_CREDITS', 402);
      assert.equal(await assertLedgerInvariant(t, u), 0);
    });

    test('429 TIER_LIMIT_IMAGES beyond the monthly image quota; a text-only turn still works', async () => {
      const u = await userWithKey('cheap-1', 20);
      assert.equal((await send(u, 2)).statusCode, 200);
      await refusedStream(u, 'TIER_LIMIT_IMAGES', 429, 2);
      assert.equal((await send(u)).statusCode, 200);
      const wallet = (await t.call('GET', '/api/billing/wallet', { user: u })).json<{ images: { used: number } }>();
      assert.equal(wallet.images.used, 2);
    });

    test('402 BILLING_NOT_AVAILABLE when the billing store is unreachable (fail closed)', async () => {
      const u = await userWithKey('cheap-1', 20);
      const dead = await migratedEmbeddedDb();
      await dead.close();
      billingOverride = createTurnBilling({ ...t.deps, db: dead.db });
      try {
        await refusedStream(u, 'BILLING_NOT_AVAILABLE', 402);
      } finally {
        billingOverride = undefined;
      }
    });
  });
});
