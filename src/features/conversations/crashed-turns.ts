// DESIGN §10: turns whose instance is gone (killed, frozen past the sweep age) are closed and settled
// by what they stored; a running turn, however long, shows it is alive and is never taken.
import type { Deps } from '../../deps.ts';
import type { Frame } from '../../platform/frames.ts';
import { settleAbandonedTurn, silentTurns } from '../billing/turn-billing.ts';
import type { ToolOutcome } from '../advisor-tools/toolbox.ts';
import { PartsLog, storable, type ApiPart } from './parts.ts';
import * as repo from './repo.ts';
import { crashedClosingStatement } from './turn-statements.ts';
import { NO_RECEIPT } from '../usage/receipt.ts';
import { countTurnPart } from '../usage/service.ts';

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

type SweepDeps = Pick<Deps, 'db' | 'clock' | 'config' | 'logger' | 'metrics' | 'ids' | 'frames'>;

/**
 * Closes the turn's reply if still streaming — with the text, tool calls and results its frame log
 * holds (what its clients were sent, up to the last write interval: DESIGN §12 "Under faults") — and
 * settles its charge by what the reply then holds (§7: a turn that produced text is charged). True
 * when this settled it. A log that cannot be read leaves the turn for a later look.
 */
export async function settleCrashed(deps: SweepDeps, turnId: string): Promise<boolean> {
  const held = await deps.frames.held(turnId);
  const now = deps.clock.now();
  const closed = await repo.closeCrashedReply(deps.db, turnId, now, held === undefined ? undefined : replyInLog(held));
  const produced = closed?.produced === true;
  // The provider's usage comes with the end the turn never reached: its credits count, no token figures.
  const usage = closed && countTurnPart({ userId: closed.userId, provider: closed.provider, model: closed.model, receipt: NO_RECEIPT, endedAt: now });
  if (!(await settleAbandonedTurn(deps, turnId, produced, usage && crashedClosingStatement(turnId, usage)))) return false;
  deps.logger.warn({ turnId, charged: produced }, 'settled a turn whose instance is gone');
  return true;
}

/** The reply a turn's frames add up to, as a client following them assembles it. */
export function replyInLog(frames: readonly Frame[]): repo.CrashedReply {
  let parts = new PartsLog();
  for (const f of frames) {
    const { event, data } = frameOf(f);
    if (event === 'delta') parts.addText(String(data['text'] ?? ''));
    else if (event === 'tool_call') parts.addCall(callOf(data));
    else if (event === 'tool_result') parts.addResult(callOf(data), resultOf(data));
    else if (event === 'snapshot') parts = restored(data['parts']);
  }
  return { content: storable(parts.text), parts: parts.stored() };
}

function frameOf(f: Frame): { event: string; data: Record<string, unknown> } {
  const event = /^event: (.*)$/m.exec(f.wire)?.[1] ?? '';
  const data: unknown = JSON.parse(/^data: (.*)$/m.exec(f.wire)?.[1] ?? '{}');
  return { event, data: typeof data === 'object' && data !== null ? (data as Record<string, unknown>) : {} };
}

const callOf = (data: Record<string, unknown>): { id: string; name: string; arguments: string } => ({
  id: String(data['id'] ?? ''),
  name: String(data['name'] ?? ''),
  arguments: JSON.stringify(data['arguments'] ?? {}),
});

const resultOf = (data: Record<string, unknown>): ToolOutcome<string> =>
  data['ok'] === true
    ? { ok: true, result: data['result'] as Record<string, unknown> }
    : { ok: false, error: data['error'] as { code: string; message: string } };

/** A snapshot's parts (as the API shows them) taken up again. */
function restored(apiParts: unknown): PartsLog {
  const parts = new PartsLog();
  for (const p of (Array.isArray(apiParts) ? apiParts : []) as ApiPart[]) {
    if (p.type === 'text') parts.addText(p.text);
    else if (p.type === 'tool_call') parts.addCall({ id: p.id, name: p.name, arguments: JSON.stringify(p.arguments) });
    else parts.addResult(p, p);
  }
  return parts;
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
    // A turn that cannot be settled now (its log unreadable) is looked at again next sweep; the others go on.
    try {
      if (await settleCrashed(deps, turnId)) settled++;
    } catch (err) {
      deps.logger.warn({ err, turnId }, 'settling a crashed turn failed; the next sweep tries again');
    }
  }
  return settled;
}
