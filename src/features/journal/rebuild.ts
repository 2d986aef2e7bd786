// DESIGN §17 kept on write what §14 did not: round trips. A symbol whose book was written before (book
// version 1) has none stored; at start its fills are replayed once, under its account's row lock, as
// a back-dated fill would replay them. Outcomes and days do not change (every such fill is ×1); the
// round trips and the book are written. Idempotent: another instance doing the same meanwhile waits
// for the lock and then finds nothing left to do.
import { sql } from 'kysely';
import type { Db } from '../../db/types.ts';
import { lockAccountWithZones } from '../accounts/service.ts';
import { BOOK_VERSION } from './fifo.ts';
import { recordTrades } from './record.ts';

export async function rebuildOldBooks(db: Db): Promise<number> {
  const { rows } = await sql<{ account_id: string; user_id: string; symbols: string[] }>`
    select b.account_id, a.user_id, array_agg(b.symbol order by b.symbol) as symbols
    from trade_books b join accounts a on a.id = b.account_id
    where b.version <> ${BOOK_VERSION} group by b.account_id, a.user_id`.execute(db);
  let replayed = 0;
  for (const r of rows) {
    await db.transaction().execute(async (trx) => {
      const { account, timezones } = await lockAccountWithZones(trx, r.user_id, r.account_id);
      const { rows: still } = await sql<{ symbol: string }>`select symbol from trade_books
        where account_id = ${r.account_id} and version <> ${BOOK_VERSION} for update`.execute(trx);
      if (still.length === 0) return;
      await recordTrades(
        trx,
        r.account_id,
        { timezones, fallback: account.timezone },
        [],
        still.map((s) => ({ symbol: s.symbol, tradingDay: null })),
      );
      replayed += still.length;
    });
  }
  return replayed;
}
