import type { Clock } from './clock.ts';
import { randomToken } from './ids.ts';
import type { StreamLeases } from './stream-lease.ts';

/** Single-process leases for the embedded default; expiry is read from the injected clock. */
export function createMemoryStreamLeases(clock: Clock): StreamLeases {
  const leases = new Map<string, { token: string; expiresAtMs: number }>();

  function live(userId: string, nowMs: number) {
    const lease = leases.get(userId);
    if (lease && lease.expiresAtMs <= nowMs) {
      leases.delete(userId);
      return undefined;
    }
    return lease;
  }

  return {
    async acquire(userId, ttlMs) {
      const nowMs = clock.now().getTime();
      if (live(userId, nowMs)) return null;
      const token = randomToken(16);
      leases.set(userId, { token, expiresAtMs: nowMs + ttlMs });
      return token;
    },
    async renew(userId, token, ttlMs) {
      const nowMs = clock.now().getTime();
      const lease = live(userId, nowMs);
      if (lease !== undefined && lease.token !== token) return false;
      // Extended, or taken back when it expired and nobody took it.
      leases.set(userId, { token, expiresAtMs: nowMs + ttlMs });
      return true;
    },
    async release(userId, token) {
      if (leases.get(userId)?.token === token) leases.delete(userId);
    },
    async close() {
      leases.clear();
    },
  };
}
