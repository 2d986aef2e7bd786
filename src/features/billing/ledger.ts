import type { LedgerEntriesTable, Trx } from '../../db/types.ts';
import * as repo from './repo.ts';

export interface LedgerWrite {
  readonly id: string;
  readonly userId: string;
  /** Non-zero integer credits; negative takes credits away. */
  readonly amount: number;
  readonly kind: LedgerEntriesTable['kind'];
  /** Unique idempotency reference, e.g. `checkout:<sessionId>`. */
  readonly reference: string;
  readonly note?: string;
  readonly now: Date;
}

/**
 * Appends one ledger entry and moves the cached balance with it, in the caller's transaction, which
 * must hold the wallet lock (repo.lockWallet). A reference already present writes nothing: false.
 * (A turn's `turn:` entry is written the same way, in SQL, by reserve_turn.)
 */
export async function appendEntry(trx: Trx, w: LedgerWrite): Promise<boolean> {
  if (!Number.isSafeInteger(w.amount) || w.amount === 0) throw new Error(`ledger amount must be a non-zero integer (got ${w.amount})`);
  const inserted = await repo.insertLedgerEntry(trx, {
    id: w.id,
    user_id: w.userId,
    amount: w.amount,
    kind: w.kind,
    reference: w.reference,
    note: w.note ?? null,
    created_at: w.now,
  });
  if (inserted) await repo.addToBalance(trx, w.userId, w.amount, w.now);
  return inserted;
}

/** Calendar month (UTC) of an instant, as stored: 'YYYY-MM'. */
export function monthKey(at: Date): string {
  return at.toISOString().slice(0, 7);
}

/** First instant of the next calendar month (UTC): when monthly allowance and images reset. */
export function nextMonthStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

export function monthStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}
