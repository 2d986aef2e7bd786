import type { Deps } from '../../deps.ts';
import { invalidCursor, makeCursor, readCursor } from '../../http/cursor.ts';
import type { Vault } from '../../platform/vault.ts';
import { ensureUser, userTier } from '../users/service.ts';
import { appendEntry, CHECKOUT_REFERENCE, monthKey, nextMonthStart } from './ledger.ts';
import * as repo from './repo.ts';

type WalletDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'ids' | 'seenUsers'>;

interface Quota {
  limit: number;
  used: number;
  remaining: number;
  resetsAt: string;
}

export async function listPacks(deps: Pick<Deps, 'config'>) {
  return deps.config.catalogue.creditPacks.map(({ packId, name, credits, amount, currency }) => ({ packId, name, credits, amount, currency }));
}

export async function wallet(deps: WalletDeps, userId: string) {
  const now = deps.clock.now();
  const tierName = await userTier(deps, userId);
  const tier = deps.config.catalogue.tiers[tierName];
  // userTier only answers a catalogue tier (the default is validated at start); this cannot happen.
  if (!tier) throw new Error(`tier ${tierName} is not in the catalogue`);
  const [credits, usage] = await Promise.all([repo.readBalance(deps.db, userId), repo.readUsage(deps.db, userId, monthKey(now))]);
  const resetsAt = nextMonthStart(now).toISOString();
  const quota = (limit: number, used: number): Quota => ({ limit, used, remaining: Math.max(0, limit - used), resetsAt });
  return {
    credits,
    tier: tierName,
    allowance: quota(tier.monthlyAllowanceTurns, usage.allowanceTurns),
    images: quota(tier.monthlyImages, usage.images),
  };
}

/** Only cursors this service made for this user's ledger are accepted; anything else is a 400. */
function ledgerSeqOf(vault: Vault, userId: string, cursor: string): number {
  const [seq, ...rest] = readCursor(vault, userId, 'ledger', cursor);
  if (rest.length > 0 || typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) throw invalidCursor();
  return seq;
}

export async function ledgerPage(deps: Pick<Deps, 'db' | 'vault'>, userId: string, cursor: string | undefined, limit: number) {
  const before = cursor === undefined ? undefined : ledgerSeqOf(deps.vault, userId, cursor);
  const rows = await repo.listLedger(deps.db, userId, before, limit + 1);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const sessions = page.flatMap((r) =>
    r.kind === 'purchase' && r.reference.startsWith(CHECKOUT_REFERENCE) ? [r.reference.slice(CHECKOUT_REFERENCE.length)] : [],
  );
  const purchases = new Map((await repo.purchasesOfSessions(deps.db, sessions)).map((p) => [`${CHECKOUT_REFERENCE}${p.session_id}`, p]));
  return {
    items: page.map((r) => {
      const p = purchases.get(r.reference);
      const purchase = p ? { packId: p.pack_id, amount: p.amount, currency: p.currency } : null;
      return { id: r.id, amount: r.amount, kind: r.kind, reference: r.reference, purchase, createdAt: r.created_at.toISOString() };
    }),
    nextCursor: rows.length > limit && last ? makeCursor(deps.vault, userId, 'ledger', [last.seq]) : null,
  };
}

/**
 * An operator's credit adjustment (positive grants, negative takes back). `ref` makes a re-run
 * idempotent: the same ref never writes twice.
 */
export async function grantCredits(
  deps: WalletDeps,
  userId: string,
  credits: number,
  reason: string,
  ref: string = deps.ids.uuid(),
): Promise<{ written: boolean; reference: string; balance: number }> {
  if (!Number.isSafeInteger(credits) || credits === 0) throw new Error('credits must be a non-zero integer');
  await ensureUser(deps, userId, undefined);
  const reference = `grant:${ref}`;
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    await repo.lockWallet(trx, userId);
    const written = await appendEntry(trx, { id: deps.ids.uuid(), userId, amount: credits, kind: 'grant', reference, note: reason, now });
    return { written, reference, balance: await repo.readBalance(trx, userId) };
  });
}
