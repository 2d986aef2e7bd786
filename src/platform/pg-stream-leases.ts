import type { Db } from '../db/types.ts';
import type { Clock } from './clock.ts';
import { randomToken } from './ids.ts';
import type { StreamLeases } from './stream-lease.ts';

/**
 * Leases as rows of `stream_leases`. Taking one is a single upsert that only overwrites an expired
 * row, so concurrent acquirers on any instance race inside PostgreSQL and exactly one wins.
 * Time comes from the injected clock; the caller owns `db`.
 */
export function createPgStreamLeases(db: Db, clock: Clock): StreamLeases {
  /**
   * Writes the lease for `token` unless another holder has it live: a free or expired row is taken,
   * and (`renewing`) the token's own row is extended. True when the row is now the token's.
   */
  async function take(userId: string, token: string, ttlMs: number, renewing: boolean): Promise<boolean> {
    const now = clock.now();
    const row = await db
      .insertInto('stream_leases')
      .values({ user_id: userId, token, expires_at: new Date(now.getTime() + ttlMs) })
      .onConflict((oc) =>
        oc
          .column('user_id')
          .doUpdateSet((eb) => ({ token: eb.ref('excluded.token'), expires_at: eb.ref('excluded.expires_at') }))
          .where((eb) =>
            renewing ? eb.or([eb('stream_leases.token', '=', token), eb('stream_leases.expires_at', '<=', now)]) : eb('stream_leases.expires_at', '<=', now),
          ),
      )
      .returning('token')
      .executeTakeFirst();
    return row?.token === token;
  }
  return {
    async acquire(userId, ttlMs) {
      const token = randomToken(16);
      return (await take(userId, token, ttlMs, false)) ? token : null;
    },
    // Extends this holder's lease, or takes it back when it expired (or vanished) and nobody took it.
    renew: (userId, token, ttlMs) => take(userId, token, ttlMs, true),
    async release(userId, token) {
      await db.deleteFrom('stream_leases').where('user_id', '=', userId).where('token', '=', token).execute();
    },
    async close() {
      // Nothing of its own to release.
    },
  };
}
