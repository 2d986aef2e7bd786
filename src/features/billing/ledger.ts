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
 * The rule itself is the database function ledger_append (db/migrations/reserve-turn-v4.ts), which
 * reserve_turn follows for a turn's `turn:` entry too.
 */
export async function appendEntry(trx: Trx, w: LedgerWrite): Promise<boolean> {
  if (!Number.isSafeInteger(w.amount) || w.amount === 0) throw new Error(`ledger amount must be a non-zero integer (got ${w.amount})`);
  return repo.appendLedgerEntry(trx, {
    id: w.id,
    user_id: w.userId,
    amount: w.amount,
    kind: w.kind,
    reference: w.reference,
    note: w.note ?? null,
    created_at: w.now,
  });
}

/** The reference of a purchase's entry is this and its checkout session's id: one purchase per session. */
export const CHECKOUT_REFERENCE = 'checkout:';

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
