// DESIGN §10: turns whose instance is gone (killed, frozen past the sweep age) are closed and settled
// by what they stored; a running turn, however long, shows it is alive and is never taken.
import type { Deps } from '../../deps.ts';
import { settleAbandonedTurn, silentTurns } from '../billing/turn-billing.ts';
import * as repo from './repo.ts';

/** When a turn whose start statement failed on the connection is looked at again (ms after the failure). */
const ABANDONED_CHECKS_MS = [500, 2_000, 5_000, 12_000];

/**
 * A turn whose start statement (its rows and its reservation, one statement) failed on the
 * connection was refused to its client, yet the statement may have committed (a lost commit
 * acknowledgement) or may still commit (a statement still running in a server that stopped
 * answering). Looked at again a few times over the next seconds, and settled like a crashed turn
 * when found (its reply holds nothing: returned), instead of holding the user's credits until the
 * sweeper's age. Each look is idempotent; a turn never stored is a no-op.
 */
export function abandonTurn(deps: SweepDeps, turnId: string): void {
  for (const ms of ABANDONED_CHECKS_MS) {
    setTimeout(() => {
      void settleCrashed(deps, turnId).catch((err: unknown) => deps.logger.warn({ err, turnId }, 'settling a turn refused at its start failed'));
    }, ms).unref();
  }
}

type SweepDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'logger' | 'metrics' | 'ids'>;

/** Closes the turn's reply if still streaming and settles its charge by what the reply holds; true when this settled it. */
async function settleCrashed(deps: SweepDeps, turnId: string): Promise<boolean> {
  const { produced } = await repo.closeCrashedReply(deps.db, turnId, deps.clock.now());
  if (!(await settleAbandonedTurn(deps, turnId, produced))) return false;
  deps.logger.warn({ turnId, charged: produced }, 'settled a turn whose instance is gone');
  return true;
}

/**
 * One sweep: every reserved turn without a sign of life for `silentForMs` has its reply closed
 * `interrupted` (if still streaming) and its charge settled by what the reply holds — charged with
 * content, returned without. Safe on every instance at once: each step is guarded and idempotent.
 * Returns the turns settled by this sweep.
 */
export async function sweepCrashedTurns(deps: SweepDeps, silentForMs: number): Promise<number> {
  let settled = 0;
  for (const turnId of await silentTurns(deps, silentForMs)) {
    if (await settleCrashed(deps, turnId)) settled++;
  }
  return settled;
}
