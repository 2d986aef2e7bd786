// Test support for the billing feature: ledger checks, credits, users and a small catalogue.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { TestApp } from '../helpers/app.ts';
import { ensureUser } from '../../src/features/users/service.ts';
import { grantCredits } from '../../src/features/billing/wallet-service.ts';
import * as repo from '../../src/features/billing/repo.ts';

/** DESIGN §8: the wallet balance equals the sum of the user's ledger, in the database and through the API. */
export async function assertLedgerInvariant(t: TestApp, userId: string): Promise<number> {
  const [balance, sum] = await Promise.all([repo.readBalance(t.deps.db, userId), ledgerSum(t, userId)]);
  assert.equal(balance, sum, `wallet ${balance} ≠ ledger sum ${sum} for ${userId}`);
  const res = await t.call('GET', '/api/billing/wallet', { user: userId });
  assert.equal(res.statusCode, 200, res.body);
  assert.equal(res.json<{ credits: number }>().credits, sum);
  return sum;
}

/** The sum of the user's ledger, read apart from the cached balance. */
export async function ledgerSum(t: TestApp, userId: string): Promise<number> {
  const row = await sql<{ total: string | number | null }>`select sum(amount) as total from ledger_entries where user_id = ${userId}`.execute(t.deps.db);
  return Number(row.rows[0]?.total ?? 0);
}

export async function giveCredits(t: TestApp, userId: string, credits: number): Promise<void> {
  await grantCredits(t.deps, userId, credits, 'test');
}

export async function ensureTestUser(t: TestApp, userId: string, tier?: string): Promise<void> {
  await ensureUser(t.deps, userId, tier);
}

export async function turnStatus(t: TestApp, turnId: string): Promise<string | undefined> {
  return (await repo.findTurnCharge(t.deps.db, turnId))?.status;
}

export async function ledgerCount(t: TestApp, userId: string): Promise<number> {
  const row = await sql<{ n: number | string }>`select count(*) as n from ledger_entries where user_id = ${userId}`.execute(t.deps.db);
  return Number(row.rows[0]?.n ?? 0);
}

/** A small catalogue for billing tests: 2 allowance turns and 3 images a month on the free tier. */
export const TEST_CATALOGUE = {
  creditPacks: [
    { packId: 'p100', name: '100 credits', credits: 100, amount: 500, currency: 'usd' },
    { packId: 'p1000', name: '1,000 credits', credits: 1000, amount: 4000, currency: 'eur' },
  ],
  tiers: { free: { monthlyAllowanceTurns: 2, monthlyImages: 3 }, pro: { monthlyAllowanceTurns: 5, monthlyImages: 10 } },
  defaultTier: 'free',
  models: [
    { provider: 'openai', match: 'cheap*', allowance: true, creditsPerTurn: 1 },
    { provider: 'openai', match: 'big*', allowance: false, creditsPerTurn: 5 },
    { provider: 'openai', match: 'gratis*', allowance: false, creditsPerTurn: 0 },
  ],
  providerDefaults: { openai: ['cheap-1'] },
  personas: [{ personaId: 'coach', name: 'Coach', systemPrompt: 'Be brief.' }],
};

/** Writes TEST_CATALOGUE to a temporary file for CONFIG_FILE. */
export function writeTestCatalogue(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'billing-catalogue-'));
  const file = path.join(dir, 'catalogue.json');
  writeFileSync(file, JSON.stringify(TEST_CATALOGUE));
  return file;
}
