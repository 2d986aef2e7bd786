// DESIGN §10: the reservation sweeper never takes a running turn, however long it runs, and settles a
// crashed one by what it stored. Real app and real streams (loopback OpenAI fake), on PGlite or PostgreSQL.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import { startOpenAiCompatibleFake, type OpenAiCompatibleFake } from '../../../test/fakes/index.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { assertLedgerInvariant, giveCredits, turnStatus } from '../../../test/kits/billing.ts';
import { sweepCrashedTurns } from './crashed-turns.ts';
import * as repo from './repo.ts';
import * as statements from './turn-statements.ts';
import { readTurnKeys, turnKeysPart } from '../advisor-keys/service.ts';
import { message, newUser, replyRow, saveKey, send, startOf, waitFor } from '../../../test/kits/conversations.ts';

const SWEEP_AFTER_MS = 1000;
const HEARTBEAT_MS = 100;
/** A model of the built-in catalogue that costs credits. */
const PAID_MODEL = 'gpt-4o';
const PAID_CREDITS = 5;

describe('crashed turns (DESIGN §10)', () => {
  let fake: OpenAiCompatibleFake;
  let t: TestApp;
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
    t = await buildTestApp({
      env: { OPENAI_BASE_URL: fake.url, STREAM_HEARTBEAT_MS: String(HEARTBEAT_MS), RESERVATION_SWEEP_AFTER_MS: String(SWEEP_AFTER_MS) },
    });
  });
  after(async () => {
    await t.close();
    await fake.close();
  });

  async function payingUser(): Promise<string> {
    const user = newUser('sweep');
    await saveKey(t, user, 'openai', fake.validKey, PAID_MODEL);
    await giveCredits(t, user, 2 * PAID_CREDITS);
    return user;
  }

  test('DESIGN §10: a running turn that outlives RESERVATION_SWEEP_AFTER_MS is never swept: it is charged at its end', async () => {
    const user = await payingUser();
    // 8 pieces 250 ms apart: twice the sweep age; the sweeper looks every 50 ms meanwhile.
    fake.enqueueStream({ chunks: Array.from({ length: 8 }, (_, i) => `part ${i} `), delayMs: 250 });
    let done = false;
    const turn = send(t, user, null, message()).finally(() => (done = true));
    let swept = 0;
    while (!done) {
      swept += await sweepCrashedTurns(t.deps, SWEEP_AFTER_MS);
      await sleep(50);
    }
    const res = await turn;
    assert.equal(res.frames.at(-1)?.event, 'done', res.body);
    assert.equal(swept, 0, 'the sweeper took a running turn');
    const turnId = String(startOf(res)['assistantMessageId']);
    assert.equal(await turnStatus(t, turnId), 'charged');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
  });

  test('DESIGN §7 / §12 under faults: a turn whose end the database refuses ends with error SHUTTING_DOWN (retryable), never done; the sweeper then stores its reply interrupted with the text sent, charged', async () => {
    const user = await payingUser();
    const marker = `refuse-end-${randomBytes(6).toString('hex')}`;
    // A real refusal of the turn's closing statement: a trigger raising on this reply's end only.
    const fn = `test_${marker.replaceAll('-', '_')}`;
    await sql
      .raw(
        `create function ${fn}() returns trigger language plpgsql as $$ begin
           if new.status <> 'streaming' and new.content like '%${marker}%' then raise exception 'refused by the test'; end if;
           return new; end $$`,
      )
      .execute(t.deps.db);
    await sql.raw(`create trigger ${fn} before update on messages for each row execute function ${fn}()`).execute(t.deps.db);
    let res: Awaited<ReturnType<typeof send>>;
    try {
      fake.enqueueStream({ chunks: ['An answer ', marker, ' in three'] });
      res = await send(t, user, null, message());
    } finally {
      await sql.raw(`drop trigger ${fn} on messages`).execute(t.deps.db);
      await sql.raw(`drop function ${fn}()`).execute(t.deps.db);
    }
    assert.equal(res.statusCode, 200, res.body);
    const ends = res.frames.filter((f) => f.event === 'done' || f.event === 'error');
    assert.deepEqual(
      ends.map((f) => [f.event, f.data['code'], f.data['retryable']]),
      [['error', 'SHUTTING_DOWN', true]],
    );
    const turnId = String(startOf(res)['assistantMessageId']);
    assert.equal((await replyRow(t, turnId))?.status, 'streaming', 'the end was not stored');
    // The turn's log line says what the client was told, not the outcome it had reached.
    const ended = t.logs
      .flatMap((chunk) => chunk.split('\n'))
      .filter((l) => l.includes('"advisor stream ended"') && l.includes(String(startOf(res)['conversationId'])))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      ended.map((l) => [l['outcome'], l['endStored']]),
      [['interrupted', false]],
    );
    await waitFor('the sweeper settled it', async () => ((await sweepCrashedTurns(t.deps, SWEEP_AFTER_MS)) > 0 ? true : undefined));
    const reply = await replyRow(t, turnId);
    assert.deepEqual([reply?.status, reply?.error_code, reply?.content], ['interrupted', 'SHUTTING_DOWN', `An answer ${marker} in three`]);
    assert.equal(await turnStatus(t, turnId), 'charged');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
  });

  /** A turn reserved and stored as it starts, whose instance then died (no live turn, no heartbeat). */
  async function crashedTurn(user: string): Promise<string> {
    const replyId = randomUUID();
    const conversationId = randomUUID();
    const [sealed] = await readTurnKeys(t.deps, user, null);
    assert.ok(sealed, 'the user has a key');
    const start: statements.TurnStart = {
      now: t.deps.clock.now(),
      userId: user,
      target: undefined,
      conversationId,
      title: 'Crashed',
      personaId: undefined,
      userMessage: { id: randomUUID(), content: 'Will it be charged?', clientMessageId: randomUUID() },
      replyId,
      attachments: [],
      admission: () => Promise.resolve({ leaseHeld: true, at: t.deps.clock.now() }),
      key: { sealed, opens: true },
      catalogue: statements.catalogueRows(t.deps.config.catalogue.models),
      historyBudget: t.deps.config.contextBudgetChars,
    };
    const { row, charge } = await t.deps.billing.reserveWithin({ turnId: replyId, userId: user, images: 0, terms: statements.TERMS }, (db, reservation) =>
      statements.startTurn(db, start, { keys: turnKeysPart(user), reservation }),
    );
    assert.equal(charge?.source, 'credits', `the turn started (refusal: ${String(row.refusal)})`);
    return replyId;
  }

  test('DESIGN §10: a crashed turn (no sign of life past the age) → its reply closed interrupted, nothing stored → its charge returned; once', async () => {
    const user = await payingUser();
    const turnId = await crashedTurn(user);
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
    // Silent for less than the age (an age no busy machine outlasts between two statements): not taken.
    assert.equal(await sweepCrashedTurns(t.deps, 10 * 60_000), 0, 'not silent long enough yet');
    await sleep(60);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 1);
    const reply = await replyRow(t, turnId);
    assert.deepEqual([reply?.status, reply?.error_code, reply?.completed_at instanceof Date], ['interrupted', 'SHUTTING_DOWN', true]);
    assert.equal(await turnStatus(t, turnId), 'returned');
    assert.equal(await assertLedgerInvariant(t, user), 2 * PAID_CREDITS);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 0, 'settled once');
  });

  test('DESIGN §10: a crashed turn whose reply holds content is charged, not made free', async () => {
    const user = await payingUser();
    const turnId = await crashedTurn(user);
    await t.deps.db.updateTable('messages').set({ content: 'Half an answer' }).where('id', '=', turnId).execute();
    await sleep(60);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 1);
    assert.equal((await replyRow(t, turnId))?.status, 'interrupted');
    assert.equal(await turnStatus(t, turnId), 'charged');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
  });

  test('DESIGN §7: a trader never pays twice because the service cut a turn — the charge of a turn the sweeper closed (SHUTTING_DOWN) is given back when its message is sent again as its replacement; once', async () => {
    const user = await payingUser();
    const turnId = await crashedTurn(user);
    await t.deps.db.updateTable('messages').set({ content: 'Half an answer' }).where('id', '=', turnId).execute();
    await sleep(60);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 1);
    assert.equal(await turnStatus(t, turnId), 'charged');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
    const reply = await replyRow(t, turnId);
    assert.ok(reply);
    const userMessage = await t.deps.db
      .selectFrom('messages')
      .select(['id', 'content'])
      .where('conversation_id', '=', reply.conversation_id)
      .where('role', '=', 'user')
      .executeTakeFirstOrThrow();
    const again = { text: userMessage.content, clientMessageId: randomUUID(), replaces: userMessage.id };
    const res = await send(t, user, reply.conversation_id, again);
    assert.equal(res.frames.at(-1)?.event, 'done', res.body);
    // The cut turn's charge came back in the transaction that reserved the new one: one turn paid in all.
    assert.equal(await turnStatus(t, turnId), 'returned');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
    // The same request again is a replay: nothing is given back twice, nothing charged again.
    const replayed = await send(t, user, reply.conversation_id, again);
    assert.equal(replayed.statusCode, 200);
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
    // Replacing a turn the service did not cut gives nothing back: the new one is paid.
    const newUserMessage = String(startOf(res)['userMessageId']);
    const third = await send(t, user, reply.conversation_id, { text: 'Once more', clientMessageId: randomUUID(), replaces: newUserMessage });
    assert.equal(third.frames.at(-1)?.event, 'done', third.body);
    assert.equal(await assertLedgerInvariant(t, user), 0);
  });

  test('DESIGN §7: a cut turn sent again with the same clientMessageId runs again in its place, and its charge is given back in that transaction; the next resend replays', async () => {
    const user = await payingUser();
    const turnId = await crashedTurn(user);
    await t.deps.db.updateTable('messages').set({ content: 'Half an answer' }).where('id', '=', turnId).execute();
    await sleep(60);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 1);
    const reply = await replyRow(t, turnId);
    assert.ok(reply);
    const userMessage = await t.deps.db
      .selectFrom('messages')
      .select(['content', 'client_message_id'])
      .where('conversation_id', '=', reply.conversation_id)
      .where('role', '=', 'user')
      .executeTakeFirstOrThrow();
    // The same request again, as a client retrying after SHUTTING_DOWN (a new conversation: no target).
    const again = { text: userMessage.content, clientMessageId: String(userMessage.client_message_id) };
    fake.enqueueStream({ chunks: ['A whole ', 'answer'] });
    const res = await send(t, user, null, again);
    assert.equal(res.frames.at(-1)?.event, 'done', res.body);
    assert.equal(startOf(res)['conversationId'], reply.conversation_id, 'in the cut turn’s conversation');
    assert.notEqual(startOf(res)['assistantMessageId'], turnId);
    assert.equal(await turnStatus(t, turnId), 'returned');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
    const stored = await t.deps.db
      .selectFrom('messages')
      .select(['role', 'content'])
      .where('conversation_id', '=', reply.conversation_id)
      .orderBy('seq')
      .execute();
    assert.deepEqual(stored, [
      { role: 'user', content: userMessage.content },
      { role: 'assistant', content: 'A whole answer' },
    ]);
    // Its reply is not a cut one: the same request now replays it, charging and giving back nothing.
    const replayed = await send(t, user, null, again);
    assert.equal(replayed.frames.at(-1)?.event, 'done', replayed.body);
    assert.equal(startOf(replayed)['assistantMessageId'], startOf(res)['assistantMessageId']);
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
  });

  test('issue 29: a crashed turn charged for its content is found by its words (indexed by the statement that charges it); one closed empty is not', async () => {
    const [paid, returned] = [await payingUser(), await payingUser()];
    const [withText, empty] = [await crashedTurn(paid), await crashedTurn(returned)];
    await t.deps.db.updateTable('messages').set({ content: 'Guidance surprised everyone' }).where('id', '=', withText).execute();
    await sleep(60);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 2);
    const found = async (user: string, q: string): Promise<number> => {
      const res = await t.call('GET', `/api/advisor/conversations?q=${q}`, { user });
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ items: unknown[] }>().items.length;
    };
    assert.deepEqual([await turnStatus(t, withText), await turnStatus(t, empty)], ['charged', 'returned']);
    assert.equal(await found(paid, 'guidance'), 1);
    assert.equal(await found(returned, 'crashed'), 0);
  });

  test('DESIGN §12 under faults: a crashed turn is closed with the text, calls and results its frame log holds (what its clients were sent) and charged, never made free', async () => {
    const user = await payingUser();
    const turnId = await crashedTurn(user);
    // What the dead instance had written of the turn's log before it died (its TurnLog never ends).
    const log = t.deps.frames.open(turnId, () => '{}', { stop: () => undefined, attached: () => undefined });
    log.append('start', '{}');
    log.append('delta', '{"text":"Half "}');
    log.append('tool_call', '{"id":"c1","name":"get_quote","arguments":{"symbol":"AAPL"}}');
    log.append('tool_result', '{"id":"c1","name":"get_quote","ok":true,"result":{"price":"1"}}');
    log.append('delta', '{"text":"an answer"}');
    await waitFor('the log written', async () => ((await t.deps.frames.held(turnId))?.length === 5 ? true : undefined), 5000);
    await sleep(60);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 1);
    const reply = await replyRow(t, turnId);
    assert.deepEqual(
      [reply?.status, reply?.error_code, reply?.content, reply?.last_frame_id],
      ['interrupted', 'SHUTTING_DOWN', 'Half an answer', repo.CRASHED_TERMINAL_ID],
    );
    assert.deepEqual(reply?.parts, [
      { type: 'text', text: 'Half ' },
      { type: 'tool_call', id: 'c1', name: 'get_quote', arguments: '{"symbol":"AAPL"}' },
      { type: 'tool_result', id: 'c1', name: 'get_quote', ok: true, result: { price: '1' } },
      { type: 'text', text: 'an answer' },
    ]);
    assert.equal(await turnStatus(t, turnId), 'charged');
    assert.equal(await assertLedgerInvariant(t, user), PAID_CREDITS);
    // DESIGN §13: the usage summary counts the charged turn, so it agrees with the ledger (no token figures: they never came).
    const usage = await t.call('GET', '/api/advisor/usage', { user });
    assert.equal(usage.statusCode, 200, usage.body);
    const total = usage.json<{ total: { turns: number; creditsCharged: number; inputTokens: number | null } }>().total;
    assert.deepEqual([total.turns, total.creditsCharged], [1, PAID_CREDITS]);
    assert.equal(await sweepCrashedTurns(t.deps, 50), 0, 'settled and counted once');
    const again = (await t.call('GET', '/api/advisor/usage', { user })).json<{ total: { turns: number } }>().total;
    assert.equal(again.turns, 1);
  });

  test('issue 14 item 3: a start whose commit acknowledgement was lost → 402 BILLING_NOT_AVAILABLE, and the reservation it did commit is returned within seconds, not held until the sweep age', async () => {
    const lostAck = await buildTestApp({
      env: { OPENAI_BASE_URL: fake.url },
      deps: {
        billing: (real) => ({
          ...real,
          // The start statement commits, then its acknowledgement is lost on the connection.
          reserveWithin: (req, store) =>
            real.reserveWithin(req, async (db, reservation) => {
              await store(db, reservation);
              throw new Error('Connection terminated unexpectedly');
            }),
        }),
      },
    });
    try {
      const user = newUser('lost-ack');
      await saveKey(lostAck, user, 'openai', fake.validKey, PAID_MODEL);
      await giveCredits(lostAck, user, 2 * PAID_CREDITS);
      const res = await send(lostAck, user, null, message());
      assert.equal(res.statusCode, 402, res.body);
      assert.equal(res.code, 'BILLING_NOT_AVAILABLE');
      const reply = await lostAck.deps.db
        .selectFrom('messages')
        .select('id')
        .where('user_id', '=', user)
        .where('role', '=', 'assistant')
        .executeTakeFirstOrThrow();
      assert.equal(await turnStatus(lostAck, reply.id), 'reserved', 'the statement did commit');
      // Looked at again within seconds of the refusal; the sweeper would wait for its age (10 minutes here).
      await waitFor('the abandoned reservation returned', async () => ((await turnStatus(lostAck, reply.id)) === 'returned' ? true : undefined));
      assert.equal((await replyRow(lostAck, reply.id))?.status, 'interrupted');
      assert.equal(await assertLedgerInvariant(lostAck, user), 2 * PAID_CREDITS);
    } finally {
      await lostAck.close();
    }
  });
});
