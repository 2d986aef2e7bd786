// The fault schedule, drawn from the seed before the run starts (so `--seed` replays it), and what
// each fault does to the processes the nemesis owns. Faults come one at a time: each heals (its
// process restarted, its store back) before the gap to the next begins.
import pg from 'pg';
import type { Cluster } from '../cluster/cluster.ts';
import type { Fleet } from './fleet.ts';
import type { OwnPostgres } from './postgres.ts';
import type { Prng } from './prng.ts';

export const FAULT_KINDS = [
  'redis-frozen',
  'redis-restarted-empty',
  'instance-kill-9',
  'instance-sigterm',
  'pg-backends-terminated',
  'pg-restarted',
  'pg-connections-exhausted',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  /** Pause before the fault, after the previous one healed. */
  readonly gapMs: number;
  readonly kind: FaultKind;
  /** The instance slot (instance faults). */
  readonly slot: number;
  /** How long a freeze or an exhaustion holds. */
  readonly holdMs: number;
}

/** The application_name of the nemesis's own connections, which its faults leave alone. */
export const NEMESIS_APPLICATION = 'advisor-nemesis';

/**
 * One fault every 10–40 s on a 15-minute run; a shorter run scales the gaps down (to 40% at 3 minutes)
 * so that it still meets every kind of fault a few times.
 */
export function planFaults(rng: Prng, minutes: number, instances: number): PlannedFault[] {
  const scale = Math.min(1, Math.max(0.4, minutes / 10));
  const plan: PlannedFault[] = [];
  let total = 0;
  for (;;) {
    const gapMs = Math.round(rng.between(10_000, 40_000) * scale);
    const kind = rng.pick(FAULT_KINDS);
    const slot = rng.int(0, instances - 1);
    const holdMs = kind === 'redis-frozen' ? rng.int(500, 3000) : rng.int(1000, 3000);
    total += gapMs;
    if (total > minutes * 60_000) return plan;
    plan.push({ gapMs, kind, slot, holdMs });
  }
}

export interface FaultTargets {
  readonly cluster: Cluster;
  readonly fleet: Fleet;
  readonly postgres: OwnPostgres;
}

/** Carries out one fault and heals it; false when it cannot be done here (skipped, and said to be). */
export async function inflict(f: PlannedFault, t: FaultTargets): Promise<boolean> {
  switch (f.kind) {
    case 'redis-frozen':
      t.cluster.redis.signal('SIGSTOP');
      try {
        await new Promise((r) => setTimeout(r, f.holdMs));
      } finally {
        t.cluster.redis.signal('SIGCONT');
      }
      return true;
    case 'redis-restarted-empty':
      await t.cluster.redis.restartEmpty();
      return true;
    case 'instance-kill-9':
    case 'instance-sigterm': {
      const slot = t.fleet.slots[f.slot];
      if (!slot) throw new Error(`no slot ${f.slot}`);
      await t.fleet.replace(slot, f.kind === 'instance-kill-9' ? 'SIGKILL' : 'SIGTERM');
      return true;
    }
    case 'pg-backends-terminated':
      await terminateServiceBackends(t.cluster.databaseUrl);
      return true;
    case 'pg-restarted':
      if (!t.postgres.owned) return false;
      await t.postgres.restart();
      return true;
    case 'pg-connections-exhausted':
      if (!t.postgres.owned) return false;
      await exhaustConnections(t, f.holdMs);
      return true;
  }
}

/** pg_terminate_backend of every backend of the service's database but the nemesis's own. */
async function terminateServiceBackends(databaseUrl: string): Promise<number> {
  const c = new pg.Client({ connectionString: databaseUrl, application_name: NEMESIS_APPLICATION });
  c.on('error', () => undefined);
  await c.connect();
  try {
    const { rows } = await c.query<{ n: number }>(
      `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and application_name not in ($1, 'advisor-cluster-test')`,
      [NEMESIS_APPLICATION],
    );
    return rows[0]?.n ?? 0;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * "Connections exhausted" (SQLSTATE 53300): every free connection of the nemesis's own server is
 * taken, then the service's backends are terminated, so each instance's pool must reconnect while the
 * server refuses — for `holdMs`; then everything taken is given back.
 */
async function exhaustConnections(t: FaultTargets, holdMs: number): Promise<void> {
  const held: pg.Client[] = [];
  try {
    for (let i = 0; i < 200; i++) {
      const c = await tryConnect(t);
      if (c === undefined) break;
      held.push(c);
    }
    // One of the held connections does the terminating (no new connection is possible now).
    const [killer] = held;
    if (killer) {
      await killer
        .query(
          `select pg_terminate_backend(pid) from pg_stat_activity where datname <> 'postgres' and pid <> pg_backend_pid() and backend_type = 'client backend' and application_name not in ($1, 'advisor-cluster-test')`,
          [NEMESIS_APPLICATION],
        )
        .catch(() => undefined);
    }
    // The terminated backends' slots are taken again as they free, before the pools' reconnects get them.
    const until = Date.now() + holdMs;
    while (Date.now() < until) {
      const c = await tryConnect(t);
      if (c !== undefined) held.push(c);
      else await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await Promise.all(held.map((c) => c.end().catch(() => undefined)));
  }
}

/** One more connection to the nemesis's PostgreSQL, or undefined when the server refuses it (its slots are full). */
async function tryConnect(t: FaultTargets): Promise<pg.Client | undefined> {
  const c = new pg.Client({ connectionString: t.postgres.adminUrl, application_name: NEMESIS_APPLICATION });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return c;
  } catch {
    await c.end().catch(() => undefined);
    return undefined;
  }
}
