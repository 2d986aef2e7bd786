import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AppError } from '../../http/errors.ts';
import { buildTestApp, type TestApp } from '../../../test/helpers/app.ts';
import { ManualClock } from '../../../test/helpers/manual-clock.ts';
import { billingAlone, type TurnCharge, type TurnRequest } from './turn-billing.ts';
import { ensureTestUser, giveCredits, TEST_CATALOGUE, writeTestCatalogue } from '../../../test/kits/billing.ts';
import { grantCredits } from './wallet-service.ts';
import * as repo from './repo.ts';

// TEST_CATALOGUE: cheap-* is an allowance model at 1 credit, big-* a credit model at 5, gratis-* costs 0;
// the free tier (the default) has 2 allowance turns and 3 images a month, pro has 5 and 10.
const creditsPerTurn = (match: string): number => TEST_CATALOGUE.models.find((m) => m.match === match)?.creditsPerTurn ?? assert.fail(`no model ${match}`);
const CHEAP = creditsPerTurn('cheap*');
const BIG = creditsPerTurn('big*');
const FREE_TIER = TEST_CATALOGUE.tiers.free;
const MONTH = '2030-01';

interface Usage {
  allowanceTurns: number;
  images: number;
}

/** Everything a reservation may write for a user. */
interface Written {
  balance: number;
  ledger: { reference: string; amount: number; kind: string }[];
  usage: Usage;
  charges: { turn_id: string; source: string; credits: number; images: number; month: string; status: string }[];
}

describe('reserve_turn decision table (DESIGN §8), with the state each row writes', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp({ clock: new ManualClock(new Date('2030-01-15T12:00:00Z')), env: { CONFIG_FILE: writeTestCatalogue() } });
  });
  after(async () => t.close());

  /** A user in the state a row starts from; usage is this month's. */
  async function user(o: { credits?: number; tier?: string | null; allowanceUsed?: number; imagesUsed?: number } = {}): Promise<string> {
    const id = `u-${randomUUID()}`;
    await ensureTestUser(t, id);
    // Written straight to the row: a stored tier the catalogue no longer has cannot be set through the service.
    if (o.tier !== undefined) await t.deps.db.updateTable('users').set({ tier: o.tier }).where('id', '=', id).execute();
    if (o.credits) await giveCredits(t, id, o.credits);
    if (o.allowanceUsed || o.imagesUsed) {
      await t.deps.db
        .insertInto('monthly_usage')
        .values({ user_id: id, month: MONTH, allowance_turns: o.allowanceUsed ?? 0, images: o.imagesUsed ?? 0 })
        .execute();
    }
    return id;
  }

  async function written(userId: string): Promise<Written> {
    const db = t.deps.db;
    const [balance, ledger, usage, charges] = await Promise.all([
      repo.readBalance(db, userId),
      db.selectFrom('ledger_entries').select(['reference', 'amount', 'kind']).where('user_id', '=', userId).orderBy('seq').execute(),
      repo.readUsage(db, userId, MONTH),
      db
        .selectFrom('turn_charges')
        .select(['turn_id', 'source', 'credits', 'images', 'month', 'status'])
        .where('user_id', '=', userId)
        .orderBy('turn_id')
        .execute(),
    ]);
    assert.equal(
      balance,
      ledger.reduce((sum, e) => sum + e.amount, 0),
      'the cached balance is the ledger sum',
    );
    return { balance, ledger, usage, charges };
  }

  function reserveTurn(req: TurnRequest): Promise<TurnCharge> {
    return t.deps.billing.reserve(req, billingAlone);
  }

  /** The row's outcome is a reservation: the charge, and exactly its writes (the `turn:` entry, the usage, the turn_charges row). */
  async function reserves(
    userId: string,
    model: string,
    images: number,
    expected: { source: TurnCharge['source']; credits: number; usage: Usage },
  ): Promise<void> {
    const was = await written(userId);
    const turnId = randomUUID();
    const charge = await reserveTurn({ turnId, userId, provider: 'openai', model, images });
    assert.deepEqual(charge, { turnId, userId, source: expected.source, credits: expected.credits, images });
    const entry = expected.credits > 0 ? [{ reference: `turn:${turnId}`, amount: -expected.credits, kind: 'turn' }] : [];
    const row = { turn_id: turnId, source: expected.source, credits: expected.credits, images, month: MONTH, status: 'reserved' };
    assert.deepEqual(await written(userId), {
      balance: was.balance - expected.credits,
      ledger: [...was.ledger, ...entry],
      usage: expected.usage,
      charges: [...was.charges, row].sort((a, b) => (a.turn_id < b.turn_id ? -1 : 1)),
    });
  }

  /** The row's outcome is a refusal: the error with its status, and nothing written. */
  async function refuses(userId: string, model: string, images: number, code: string, status: number): Promise<AppError> {
    const was = await written(userId);
    const err = await reserveTurn({ turnId: randomUUID(), userId, provider: 'openai', model, images }).then(
      () => assert.fail(`expected ${code}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof AppError, String(err));
    assert.deepEqual([err.code, err.status], [code, status]);
    assert.deepEqual(await written(userId), was, 'a refused turn writes nothing');
    return err;
  }

  test('DESIGN §8 decision: allowance model, allowance turns left → allowance turn (no credits taken)', async () => {
    const u = await user({ credits: 10, allowanceUsed: FREE_TIER.monthlyAllowanceTurns - 1 });
    await reserves(u, 'cheap-1', 0, { source: 'allowance', credits: 0, usage: { allowanceTurns: FREE_TIER.monthlyAllowanceTurns, images: 0 } });
  });

  test('DESIGN §8 decision: allowance model, allowance exhausted, credits enough → credits (creditsPerTurn)', async () => {
    const u = await user({ credits: CHEAP, allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
    await reserves(u, 'cheap-1', 0, { source: 'credits', credits: CHEAP, usage: { allowanceTurns: FREE_TIER.monthlyAllowanceTurns, images: 0 } });
  });

  test('DESIGN §8 decision: allowance model, allowance exhausted, credits short → 402 ALLOWANCE_EXHAUSTED', async () => {
    const u = await user({ allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
    await refuses(u, 'cheap-1', 0, 'ALLOWANCE_EXHAUSTED', 402);
  });

  test('DESIGN §8 decision: other model, credits enough → credits, even while allowance turns remain', async () => {
    const u = await user({ credits: BIG });
    await reserves(u, 'big-1', 0, { source: 'credits', credits: BIG, usage: { allowanceTurns: 0, images: 0 } });
  });

  test('DESIGN §8 decision: other model costing 0 → free (no ledger entry, no allowance turn), whatever the credits and allowance', async () => {
    const u = await user({ allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
    await reserves(u, 'gratis-1', 0, { source: 'free', credits: 0, usage: { allowanceTurns: FREE_TIER.monthlyAllowanceTurns, images: 0 } });
  });

  test('DESIGN §8 decision: other model, credits short, allowance turns left → 402 INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', async () => {
    const u = await user({ credits: BIG - 1, allowanceUsed: FREE_TIER.monthlyAllowanceTurns - 1 });
    await refuses(u, 'big-1', 0, 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', 402);
  });

  test('DESIGN §8 decision: other model, credits short, no allowance turn left → 402 INSUFFICIENT_CREDITS', async () => {
    const u = await user({ credits: BIG - 1, allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
    await refuses(u, 'big-1', 0, 'INSUFFICIENT_CREDITS', 402);
  });

  test('DESIGN §8 decision: a negative balance blocks spending credits; allowance and free turns are not spending', async () => {
    const exhausted = await user({ credits: -BIG, allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
    await refuses(exhausted, 'cheap-1', 0, 'ALLOWANCE_EXHAUSTED', 402);
    await refuses(exhausted, 'big-1', 0, 'INSUFFICIENT_CREDITS', 402);
    const withAllowance = await user({ credits: -BIG });
    await refuses(withAllowance, 'big-1', 0, 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE', 402);
    await reserves(withAllowance, 'cheap-1', 0, { source: 'allowance', credits: 0, usage: { allowanceTurns: 1, images: 0 } });
    await reserves(withAllowance, 'gratis-1', 0, { source: 'free', credits: 0, usage: { allowanceTurns: 1, images: 0 } });
  });

  test("DESIGN §8 decision: images beyond the tier's monthly quota → 429 TIER_LIMIT_IMAGES, whatever the model; up to the quota and text-only turns are unaffected", async () => {
    const u = await user({ credits: 100, imagesUsed: FREE_TIER.monthlyImages - 1 });
    await refuses(u, 'cheap-1', 2, 'TIER_LIMIT_IMAGES', 429);
    await refuses(u, 'gratis-1', 2, 'TIER_LIMIT_IMAGES', 429);
    await reserves(u, 'big-1', 1, { source: 'credits', credits: BIG, usage: { allowanceTurns: 0, images: FREE_TIER.monthlyImages } });
    await refuses(u, 'big-1', 1, 'TIER_LIMIT_IMAGES', 429);
    await reserves(u, 'cheap-1', 0, { source: 'allowance', credits: 0, usage: { allowanceTurns: 1, images: FREE_TIER.monthlyImages } });
    await reserves(u, 'big-1', 0, { source: 'credits', credits: BIG, usage: { allowanceTurns: 1, images: FREE_TIER.monthlyImages } });
  });

  test('DESIGN §8 decision: a stored tier the catalogue does not have (or none) → the default tier, for the reservation and the wallet alike', async () => {
    for (const stored of [null, 'gold']) {
      // On pro (5 turns) a third allowance turn would be granted; on the default tier (2) it is refused.
      const u = await user({ tier: stored, allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
      await refuses(u, 'cheap-1', 0, 'ALLOWANCE_EXHAUSTED', 402);
      await refuses(u, 'cheap-1', FREE_TIER.monthlyImages + 1, 'TIER_LIMIT_IMAGES', 429);
      const res = await t.call('GET', '/api/billing/wallet', { user: u });
      const w = res.json<{ tier: string; allowance: { limit: number }; images: { limit: number } }>();
      assert.deepEqual(
        [w.tier, w.allowance.limit, w.images.limit],
        [TEST_CATALOGUE.defaultTier, FREE_TIER.monthlyAllowanceTurns, FREE_TIER.monthlyImages],
        `stored ${stored}`,
      );
    }
    const pro = await user({ tier: 'pro', allowanceUsed: FREE_TIER.monthlyAllowanceTurns });
    await reserves(pro, 'cheap-1', 0, { source: 'allowance', credits: 0, usage: { allowanceTurns: FREE_TIER.monthlyAllowanceTurns + 1, images: 0 } });
    assert.equal((await t.call('GET', '/api/billing/wallet', { user: pro })).json<{ tier: string }>().tier, 'pro');
  });

  test('DESIGN §8 decision: a model not in the catalogue → 402 MODEL_NOT_AVAILABLE', async () => {
    const u = await user({ credits: 100 });
    await refuses(u, 'mystery-model', 0, 'MODEL_NOT_AVAILABLE', 402);
    await refuses(u, 'mystery-model', 1, 'MODEL_NOT_AVAILABLE', 402);
  });

  test("DESIGN §8 ledger: an entry's reference is unique and the cached balance moves with it (ledger_append, for grants as for turns)", async () => {
    const u = await user();
    const ref = randomUUID();
    assert.equal((await grantCredits(t.deps, u, 7, 'test', ref)).written, true);
    const again = await grantCredits(t.deps, u, 7, 'test', ref);
    assert.deepEqual([again.written, again.balance], [false, 7]);
    assert.deepEqual((await written(u)).ledger, [{ reference: `grant:${ref}`, amount: 7, kind: 'grant' }]);
    await reserves(u, 'big-1', 0, { source: 'credits', credits: BIG, usage: { allowanceTurns: 0, images: 0 } });
  });
});
