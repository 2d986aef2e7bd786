// DESIGN §12 "Under faults": one rule answers "is this turn live?" wherever it is asked — the fence
// (reserve_turn refuses a second turn of a user whose reserved turn is live), a replay of a message
// whose reply is still reserved, a follower on another instance (attach), the running turn's count of
// followers elsewhere, and the crash sweeper, which takes only turns that stopped being live long ago.

/** A turn (or a follower) with no sign of life for this many heartbeats is taken for one whose instance is gone. */
export const LIVENESS_BEATS = 3;

/** How long one sign of life keeps a turn live: three heartbeats (STREAM_HEARTBEAT_MS). */
export const liveWindowMs = (heartbeatMs: number): number => LIVENESS_BEATS * heartbeatMs;

/** The rule: live while its last sign of life (a frame, a heartbeat, its reservation) is less than three heartbeats old. */
export function isLive(lastSignMs: number, nowMs: number, heartbeatMs: number): boolean {
  return nowMs - lastSignMs < liveWindowMs(heartbeatMs);
}

/** The same rule for a query: a last sign of life later than this is live (what the database's fence compares). */
export function liveSince(nowMs: number, heartbeatMs: number): Date {
  return new Date(nowMs - liveWindowMs(heartbeatMs));
}

/**
 * The sweeper's cutoff: a reserved turn whose last sign of life is older than this has not been live
 * for RESERVATION_SWEEP_AFTER_MS. config.ts refuses a value below the live window, so a live turn is
 * never taken; the longer wait lets a frozen instance come back to its turns.
 */
export function sweepableSince(nowMs: number, sweepAfterMs: number): Date {
  return new Date(nowMs - sweepAfterMs);
}
