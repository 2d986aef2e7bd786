// DESIGN §10: turns whose instance is gone (killed, frozen past the sweep age) are closed and settled
// by what they stored; a running turn, however long, shows it is alive and is never taken.
import type { Deps } from '../../deps.ts';
import { settleAbandonedTurn, silentTurns } from '../billing/turn-billing.ts';
import * as repo from './repo.ts';

/**
 * One sweep: every reserved turn without a sign of life for `silentForMs` has its reply closed
 * `interrupted` (if still streaming) and its charge settled by what the reply holds — charged with
 * content, returned without. Safe on every instance at once: each step is guarded and idempotent.
 * Returns the turns settled by this sweep.
 */
export async function sweepCrashedTurns(deps: Pick<Deps, 'db' | 'clock' | 'config' | 'logger' | 'metrics' | 'ids'>, silentForMs: number): Promise<number> {
  let settled = 0;
  for (const turnId of await silentTurns(deps, silentForMs)) {
    const { produced } = await repo.closeCrashedReply(deps.db, turnId, deps.clock.now());
    if (await settleAbandonedTurn(deps, turnId, produced)) {
      settled++;
      deps.logger.warn({ turnId, charged: produced }, 'settled a turn whose instance is gone');
    }
  }
  return settled;
}
