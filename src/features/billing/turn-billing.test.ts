import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import { AppError } from '../../http/errors.ts';
import { buildTestApp, STORES, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import type { Db } from '../../db/types.ts';
import {
  createTurnBilling,
  markTurnsAlive,
  settleAbandonedTurn,
  billingAlone,
  settledAlone,
  silentTurns,
  type ChargeRow,
  type TurnBilling,
  type TurnCharge,
} from './turn-billing.ts';
import { assertLedgerInvariant, ensureTestUser, giveCredits, ledgerCount, turnStatus, writeTestCatalogue } from '../../../test/kits/billing.ts';
import { waitFor } from '../../../test/kits/conversations.ts';
import { migratedEmbeddedDb } from '../../../test/helpers/pglite-template.ts';

type Wallet = { credits: number; tier: string; allowance: { used: number; remaining: number }; images: { used: number; remaining: number; resetsAt: string } };

describe('turn billing (DESIGN §8)', () => {
  let t: TestApp;
  const clock = new ManualClock(new Date('2030-01-15T12:00:00Z'));
  const env = { CONFIG_FILE: writeTestCatalogue() };
  before(async () => {
    t = await buildTestApp({ clock, env });
  });
  after(async () => t.close());

  async function user(credits = 0, tier?: string): Promise<string> {
    const id = `u-${randomUUID()}`;
    await ensureTestUser(t, id, tier);
    if (credits !== 0) await giveCredits(t, id, credits);
    return id;
  }
  const reserve = (userId: string, model: string, images = 0, billing: TurnBilling = t.deps.billing) =>
    billing.reserve({ turnId: randomUUID(), userId, provider: 'openai', model, images }, billingAlone);
  async function refused(work: Promise<unknown>, code: string, status: number): Promise<AppError> {
    const err = await work.then(
      () => assert.fail(`expected ${code}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.code, code);
    assert.equal(err.status, status);
    return err;
  }
  async function walletOf(userId: string): Promise<Wallet> {
    return (await t.call('GET', '/api/billing/wallet', { user: userId })).json<Wallet>();
  }

  describe('refusals, each by its exact condition', () => {
    test('MODEL_NOT_AVAILABLE (402): a model not in the catalogue; nothing is written', async () => {
      const u = await user(100);
      await refused(reserve(u, 'mystery-model'), 'MODEL_NOT_AVAILABLE', 402);
      assert.equal(await ledgerCount(t, u), 1);
      assert.equal((await walletOf(u)).allowance.used, 0);
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });

    test('ALLOWANCE_EXHAUSTED (402): allowance model, allowance used up and not enough credits', async () => {
      const u = await user();
      await reserve(u, 'cheap-1');
      await reserve(u, 'cheap-1');
      await refused(reserve(u, 'cheap-1'), 'ALLOWANCE_EXHAUSTED', 402);
      assert.equal((await walletOf(u)).allowance.used, 2);
      await assertLedgerInvariant(t, u);
    });

    test('INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE (402): credit model, not enough credits, allowance turns remain', async () => {
      const u = await user(4);
      await refused(reserve(u, 'big-1'), 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', 402);
      assert.equal(await assertLedgerInvariant(t, u), 4);
    });

    test('INSUFFICIENT_CREDITS (402): credit model, not enough credits, no allowance turn left', async () => {
      const u = await user(4);
      await reserve(u, 'cheap-1');
      await reserve(u, 'cheap-1');
      await refused(reserve(u, 'big-1'), 'INSUFFICIENT_CREDITS', 402);
      assert.equal(await assertLedgerInvariant(t, u), 4);
    });

    test('BILLING_NOT_AVAILABLE (402): the billing store is unreachable → refused (fail closed) and logged', async () => {
      const u = await user(100);
      const dead = await migratedEmbeddedDb();
      await dead.close();
      const billing = createTurnBilling({ ...t.deps, db: dead.db });
      await refused(reserve(u, 'cheap-1', 0, billing), 'BILLING_NOT_AVAILABLE', 402);
      await refused(reserve(u, 'big-1', 0, billing), 'BILLING_NOT_AVAILABLE', 402);
      assert.ok(t.logs.some((l) => l.includes('billing store unavailable')));
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });

    test('a refused turn charges nothing, consumes no allowance and no image quota', async () => {
      const u = await user(3);
      await reserve(u, 'cheap-1', 1);
      await reserve(u, 'cheap-1', 1);
      await refused(reserve(u, 'big-1', 1), 'INSUFFICIENT_CREDITS', 402);
      const w = await walletOf(u);
      assert.deepEqual([w.credits, w.allowance.used, w.images.used], [3, 2, 2]);
      await assertLedgerInvariant(t, u);
    });
  });

  describe('decision', () => {
    test('allowance model: allowance turns first, then credits (creditsPerTurn), and the start frame data says which', async () => {
      const u = await user(10);
      const first = await reserve(u, 'cheap-1');
      const second = await reserve(u, 'cheap-mini');
      const third = await reserve(u, 'cheap-1');
      assert.deepEqual([first.source, first.credits, second.source, third.source, third.credits], ['allowance', 0, 'allowance', 'credits', 1]);
      const w = await walletOf(u);
      assert.deepEqual([w.credits, w.allowance.used, w.allowance.remaining], [9, 2, 0]);
      assert.equal(await assertLedgerInvariant(t, u), 9);
    });

    test('credit model: charged creditsPerTurn even while allowance turns remain', async () => {
      const u = await user(12);
      const c = await reserve(u, 'big-1');
      assert.deepEqual([c.source, c.credits], ['credits', 5]);
      assert.equal((await walletOf(u)).allowance.used, 0);
      assert.equal(await assertLedgerInvariant(t, u), 7);
    });

    test('a zero-cost model is free: no ledger entry, no allowance used', async () => {
      const u = await user();
      const c = await reserve(u, 'gratis-1');
      assert.deepEqual([c.source, c.credits], ['free', 0]);
      assert.equal(await ledgerCount(t, u), 0);
      assert.equal((await walletOf(u)).allowance.used, 0);
    });

    test('the tier decides the allowance: pro gets 5 turns a month', async () => {
      const u = await user(0, 'pro');
      for (let i = 0; i < 5; i++) assert.equal((await reserve(u, 'cheap-1')).source, 'allowance');
      await refused(reserve(u, 'cheap-1'), 'ALLOWANCE_EXHAUSTED', 402);
    });

    test('calendar month (UTC): the allowance resets on the 1st at 00:00 UTC', async () => {
      const u = await user();
      clock.set(new Date('2030-01-31T23:59:59Z'));
      await reserve(u, 'cheap-1');
      await reserve(u, 'cheap-1');
      await refused(reserve(u, 'cheap-1'), 'ALLOWANCE_EXHAUSTED', 402);
      assert.equal((await walletOf(u)).allowance.remaining, 0);
      clock.set(new Date('2030-02-01T00:00:00Z'));
      const w = await walletOf(u);
      assert.deepEqual([w.allowance.used, w.images.resetsAt], [0, '2030-03-01T00:00:00.000Z']);
      assert.equal((await reserve(u, 'cheap-1')).source, 'allowance');
      clock.set(new Date('2030-01-15T12:00:00Z'));
    });
  });

  describe('image quota', () => {
    test('TIER_LIMIT_IMAGES (429) when the turn’s images would exceed the monthly quota; text-only turns unaffected', async () => {
      const u = await user(100);
      await reserve(u, 'cheap-1', 2);
      const err = await refused(reserve(u, 'big-1', 2), 'TIER_LIMIT_IMAGES', 429);
      assert.equal(err.headers['Retry-After'], String(16 * 86400 + 12 * 3600));
      assert.match(err.headers['RateLimit-Policy'] ?? '', /^"monthly-images";q=3;w=\d+$/);
      assert.equal(err.headers['RateLimit'], `"monthly-images";r=1;t=${16 * 86400 + 12 * 3600}`);
      assert.equal((await reserve(u, 'big-1', 0)).source, 'credits');
      assert.equal((await reserve(u, 'big-1', 1)).images, 1);
      await refused(reserve(u, 'big-1', 1), 'TIER_LIMIT_IMAGES', 429);
      const w = await walletOf(u);
      assert.deepEqual([w.images.used, w.images.remaining, w.credits], [3, 0, 90]);
      await assertLedgerInvariant(t, u);
    });
  });

  describe('settlement', () => {
    test('DESIGN §7: no delta produced → credits, allowance turn and images are returned, exactly once', async () => {
      const u = await user(20);
      const paid = await reserve(u, 'big-1', 1);
      const free = await reserve(u, 'cheap-1', 2);
      assert.equal((await walletOf(u)).credits, 15);
      await Promise.all(Array.from({ length: 10 }, () => t.deps.billing.settle(paid, false, settledAlone)));
      await t.deps.billing.settle(free, false, settledAlone);
      await t.deps.billing.settle(free, true, settledAlone);
      const w = await walletOf(u);
      assert.deepEqual([w.credits, w.allowance.used, w.images.used], [20, 0, 0]);
      assert.deepEqual([await turnStatus(t, paid.turnId), await turnStatus(t, free.turnId)], ['returned', 'returned']);
      const refs = (await t.call('GET', '/api/billing/ledger', { user: u })).json<{ items: { reference: string; amount: number }[] }>().items;
      assert.deepEqual(
        refs.slice(0, 2).map((i) => [i.reference, i.amount]),
        [
          [`turn-return:${paid.turnId}`, 5],
          [`turn:${paid.turnId}`, -5],
        ],
      );
      assert.equal(await assertLedgerInvariant(t, u), 20);
    });

    test(
      'DESIGN §16: a turn end that finds no free pooled connection is tried again until it is stored, never given up',
      { skip: STORES.databaseUrl ? false : 'needs PostgreSQL (a pool to starve)' },
      async () => {
        const u = await user(10);
        const c = await reserve(u, 'big-1');
        // A second instance whose pool holds one connection and waits 100 ms for it; that one held busy.
        const starved = await buildTestApp({ shareWith: t, clock, env: { ...env, DATABASE_POOL_SIZE: '1', DATABASE_CONNECT_TIMEOUT_MS: '100' } });
        try {
          let release!: () => void;
          const held = new Promise<void>((resolve) => (release = resolve));
          let holding!: () => void;
          const taken = new Promise<void>((resolve) => (holding = resolve));
          const holder = starved.deps.db.connection().execute(async () => {
            holding();
            await held;
          });
          await taken;
          const settled = starved.deps.billing.settle(c, true, settledAlone);
          await waitFor('three failed tries', async () => (starved.logs.filter((l) => l.includes('trying again')).length >= 3 ? true : undefined));
          assert.equal(await turnStatus(t, c.turnId), 'reserved', 'not stored while no connection is free');
          release();
          await holder;
          await settled;
          assert.equal(await turnStatus(t, c.turnId), 'charged');
          assert.equal(await assertLedgerInvariant(t, u), 5);
          // advisor_settlement_retries_total counts each try again; nothing counted as failed.
          const value = async (c: typeof starved.deps.metrics.settlementRetries): Promise<number> => (await c.get()).values[0]?.value ?? 0;
          assert.ok((await value(starved.deps.metrics.settlementRetries)) >= 3);
          assert.equal(await value(starved.deps.metrics.settlementFailures), 0);
        } finally {
          await starved.close();
        }
      },
    );

    test('produced → charged; a later settlement changes nothing', async () => {
      const u = await user(10);
      const c = await reserve(u, 'big-1');
      await t.deps.billing.settle(c, true, settledAlone);
      await t.deps.billing.settle(c, false, settledAlone);
      assert.equal(await turnStatus(t, c.turnId), 'charged');
      assert.equal(await assertLedgerInvariant(t, u), 5);
    });

    test('a turn returned after the month changed gives its allowance back to the month it was counted in', async () => {
      const u = await user();
      clock.set(new Date('2030-04-30T23:59:00Z'));
      const c = await reserve(u, 'cheap-1', 1);
      clock.set(new Date('2030-05-01T00:01:00Z'));
      await reserve(u, 'cheap-1');
      await t.deps.billing.settle(c, false, settledAlone);
      const w = await walletOf(u);
      assert.deepEqual([w.allowance.used, w.images.used], [1, 0]);
      const april = await t.deps.db.selectFrom('monthly_usage').selectAll().where('user_id', '=', u).where('month', '=', '2030-04').executeTakeFirstOrThrow();
      assert.deepEqual([april.allowance_turns, april.images], [0, 0]);
      clock.set(new Date('2030-01-15T12:00:00Z'));
    });

    test("DESIGN §10: only reservations without a sign of life for the age are the sweeper's; a heartbeat keeps a long turn out", async () => {
      const u = await user(20);
      const old = await reserve(u, 'big-1');
      const long = await reserve(u, 'big-1');
      clock.advance(3 * 60_000);
      await markTurnsAlive(t.deps, [long.turnId]);
      const fresh = await reserve(u, 'big-1');
      const silent = await silentTurns(t.deps, 2 * 60_000);
      assert.ok(silent.includes(old.turnId), 'silent for 3 minutes');
      assert.ok(!silent.includes(long.turnId), 'reserved 3 minutes ago, alive just now');
      assert.ok(!silent.includes(fresh.turnId));
      clock.set(new Date('2030-01-15T12:00:00Z'));
    });

    test('DESIGN §10: an abandoned turn is settled by what it stored: returned without content, charged with it; once', async () => {
      const u = await user(10);
      const empty = await reserve(u, 'big-1');
      const partial = await reserve(u, 'big-1');
      assert.equal(await settleAbandonedTurn(t.deps, empty.turnId, false), true);
      assert.equal(await settleAbandonedTurn(t.deps, partial.turnId, true), true);
      assert.deepEqual([await turnStatus(t, empty.turnId), await turnStatus(t, partial.turnId)], ['returned', 'charged']);
      assert.equal(await assertLedgerInvariant(t, u), 5);
      // The turn's own settlement, if its instance comes back, changes nothing.
      assert.equal(await settleAbandonedTurn(t.deps, empty.turnId, true), false);
      await t.deps.billing.settle(empty, true, settledAlone);
      await t.deps.billing.settle(partial, false, settledAlone);
      assert.deepEqual([await turnStatus(t, empty.turnId), await turnStatus(t, partial.turnId)], ['returned', 'charged']);
      assert.equal(await assertLedgerInvariant(t, u), 5);
    });

    test('a negative balance blocks spending until it is positive again', async () => {
      const u = await user(3);
      await t.deps.db.transaction().execute(async (trx) => {
        await sql`update wallets set balance = balance - 8 where user_id = ${u}`.execute(trx);
        await sql`insert into ledger_entries (id, user_id, amount, kind, reference, created_at) values (${randomUUID()}, ${u}, -8, 'refund', ${`refund:test:${u}`}, now())`.execute(
          trx,
        );
      });
      assert.equal(await assertLedgerInvariant(t, u), -5);
      await reserve(u, 'cheap-1');
      await reserve(u, 'cheap-1');
      await refused(reserve(u, 'cheap-1'), 'ALLOWANCE_EXHAUSTED', 402);
      await refused(reserve(u, 'big-1'), 'INSUFFICIENT_CREDITS', 402);
      await giveCredits(t, u, 10);
      assert.equal((await reserve(u, 'big-1')).source, 'credits');
      assert.equal(await assertLedgerInvariant(t, u), 0);
    });
  });

  describe("reserve: the reservation read inside the caller's own statement", () => {
    // The caller's own part writes a users row (any table would do), so a test can see whether it was stored.
    const storing =
      (id: string) =>
      async (db: Db, reservation: RawBuilder<ChargeRow>): Promise<ChargeRow | undefined> => {
        const { rows } = await sql<ChargeRow>`with charge as materialized (${reservation}), mine as (insert into users (id) values (${id}))
        select source, credits from charge`.execute(db);
        const row = rows[0];
        if (!row) throw new Error('the statement returned no row');
        return row;
      };
    const reserveWith = (userId: string, model: string, id: string, images = 0, billing: TurnBilling = t.deps.billing) =>
      billing.reserve({ turnId: randomUUID(), userId, provider: 'openai', model, images }, storing(id));
    const stored = async (id: string) => (await t.deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
    const marker = () => `marker-${randomUUID()}`;

    test("the reservation and the caller's rows are stored together; the decision is reserve's", async () => {
      const u = await user(10);
      const [a, b, c] = [marker(), marker(), marker()];
      const first = await reserveWith(u, 'cheap-1', a);
      const paid = await reserveWith(u, 'big-1', b, 1);
      const free = await reserveWith(u, 'gratis-1', c);
      assert.deepEqual([first.source, first.credits, paid.source, paid.credits, paid.images, free.source], ['allowance', 0, 'credits', 5, 1, 'free']);
      assert.deepEqual([await stored(a), await stored(b), await stored(c)], [true, true, true]);
      assert.equal(await turnStatus(t, paid.turnId), 'reserved');
      const w = await walletOf(u);
      assert.deepEqual([w.credits, w.allowance.used, w.images.used], [5, 1, 1]);
      assert.equal(await assertLedgerInvariant(t, u), 5);
    });

    test("a refusal (402 / 429 with its headers) stores none of the caller's rows and charges nothing", async () => {
      const u = await user(3);
      const m = marker();
      await refused(reserveWith(u, 'big-1', m), 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', 402);
      await refused(reserveWith(u, 'mystery-model', m), 'MODEL_NOT_AVAILABLE', 402);
      const err = await refused(reserveWith(u, 'cheap-1', m, 4), 'TIER_LIMIT_IMAGES', 429);
      assert.equal(err.headers['RateLimit'], `"monthly-images";r=3;t=${16 * 86400 + 12 * 3600}`);
      for (let i = 0; i < 5; i++) await reserveWith(u, 'cheap-1', marker());
      await refused(reserveWith(u, 'cheap-1', m), 'ALLOWANCE_EXHAUSTED', 402);
      await refused(reserveWith(u, 'big-1', m), 'INSUFFICIENT_CREDITS', 402);
      assert.equal(await stored(m), false);
      const w = await walletOf(u);
      assert.deepEqual([w.credits, w.allowance.used, w.images.used], [0, 2, 0]);
      assert.equal(await assertLedgerInvariant(t, u), 0);
    });

    test("the caller's part failing reserves nothing, and its own error reaches the caller unchanged", async () => {
      const u = await user(10);
      // The users row of u exists: the caller's insert breaks its primary key after the reservation was read.
      const err = await reserveWith(u, 'big-1', u, 1).then(
        () => assert.fail("expected the caller's unique violation"),
        (e: unknown) => e,
      );
      assert.ok(!(err instanceof AppError), String(err));
      assert.equal((err as { code?: string }).code, '23505');
      assert.equal(await ledgerCount(t, u), 1);
      const w = await walletOf(u);
      assert.deepEqual([w.credits, w.allowance.used, w.images.used], [10, 0, 0]);
      assert.equal((await t.deps.db.selectFrom('turn_charges').select('turn_id').where('user_id', '=', u).execute()).length, 0);
      assert.equal(await assertLedgerInvariant(t, u), 10);
    });

    test("BILLING_NOT_AVAILABLE (402) when billing's store is unreachable, whatever the caller's statement", async () => {
      const u = await user(100);
      const dead = await migratedEmbeddedDb();
      await dead.close();
      const m = marker();
      await refused(reserveWith(u, 'big-1', m, 0, createTurnBilling({ ...t.deps, db: dead.db })), 'BILLING_NOT_AVAILABLE', 402);
      assert.equal(await stored(m), false);
      assert.equal(await assertLedgerInvariant(t, u), 100);
    });
  });

  describe('ledger', () => {
    test('DESIGN §8: the ledger is append-only in the database: update, delete and truncate are refused', async () => {
      const u = await user(7);
      for (const q of [
        sql`update ledger_entries set amount = 700 where user_id = ${u}`,
        sql`delete from ledger_entries where user_id = ${u}`,
        sql`truncate ledger_entries`,
      ]) {
        await assert.rejects(q.execute(t.deps.db), /append-only/);
      }
      assert.equal(await assertLedgerInvariant(t, u), 7);
    });
  });

  describe('concurrency', () => {
    async function secondInstance(): Promise<{ billing: TurnBilling; close(): Promise<void> }> {
      if (STORES.databaseUrl) {
        const t2 = await buildTestApp({ shareWith: t, clock, env });
        return { billing: t2.deps.billing, close: () => t2.close() };
      }
      // Embedded PGlite lives in one process (shareWith cannot reach it); a second billing over it
      // keeps no state of its own, which is what a second instance would be.
      return { billing: createTurnBilling(t.deps), close: async () => {} };
    }

    for (const k of [0, 1, 7]) {
      test(`DESIGN §8: 500 concurrent reserves across two instances against a balance for ${k} turns → exactly ${k} charged, never overdrawn`, async () => {
        const second = await secondInstance();
        try {
          const u = await user(0);
          await reserve(u, 'cheap-1');
          await reserve(u, 'cheap-1');
          if (k > 0) await giveCredits(t, u, 5 * k);
          const results = await Promise.allSettled(
            Array.from({ length: 500 }, (_, i) => reserve(u, 'big-1', 0, i % 2 === 0 ? t.deps.billing : second.billing)),
          );
          const ok = results.filter((r): r is PromiseFulfilledResult<TurnCharge> => r.status === 'fulfilled');
          const codes = new Set(results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as AppError).code] : [])));
          assert.equal(ok.length, k);
          assert.deepEqual([...codes], ['INSUFFICIENT_CREDITS']);
          assert.equal(await assertLedgerInvariant(t, u), 0);
          const charged = await t.deps.db.selectFrom('turn_charges').select('turn_id').where('user_id', '=', u).where('source', '=', 'credits').execute();
          assert.equal(charged.length, k);
          await Promise.all(ok.map((r, i) => (i % 2 === 0 ? t.deps.billing : second.billing).settle(r.value, false, settledAlone)));
          assert.equal(await assertLedgerInvariant(t, u), 5 * k);
        } finally {
          await second.close();
        }
      });
    }

    test("DESIGN §8: 500 concurrent reserves (inside the caller's statement) across two instances against a balance for 7 turns → exactly 7 charged", async () => {
      const second = await secondInstance();
      try {
        const u = await user(0);
        await reserve(u, 'cheap-1');
        await reserve(u, 'cheap-1');
        await giveCredits(t, u, 35);
        const results = await Promise.allSettled(
          Array.from({ length: 500 }, (_, i) => {
            const billing = i % 2 === 0 ? t.deps.billing : second.billing;
            return billing.reserve({ turnId: randomUUID(), userId: u, provider: 'openai', model: 'big-1', images: 0 }, billingAlone);
          }),
        );
        const ok = results.filter((r): r is PromiseFulfilledResult<TurnCharge> => r.status === 'fulfilled');
        const codes = new Set(results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as AppError).code] : [])));
        assert.equal(ok.length, 7);
        assert.deepEqual([...codes], ['INSUFFICIENT_CREDITS']);
        assert.equal(await assertLedgerInvariant(t, u), 0);
        await Promise.all(ok.map((r) => t.deps.billing.settle(r.value, false, settledAlone)));
        assert.equal(await assertLedgerInvariant(t, u), 35);
      } finally {
        await second.close();
      }
    });

    test('concurrent allowance reserves never exceed the monthly allowance (the first turns of a user with no wallet or usage row yet)', async () => {
      const second = await secondInstance();
      try {
        const u = await user(0, 'pro');
        const results = await Promise.allSettled(
          Array.from({ length: 100 }, (_, i) => reserve(u, 'cheap-1', 0, i % 2 === 0 ? t.deps.billing : second.billing)),
        );
        assert.equal(results.filter((r) => r.status === 'fulfilled').length, 5);
        assert.equal((await walletOf(u)).allowance.used, 5);
      } finally {
        await second.close();
      }
    });
  });
});
