// The embedded database (PGlite) is PostgreSQL in one process with no autovacuum daemon, so nothing
// ever ANALYZEs a table: the planner keeps believing a table of 100,000 trades is empty and reads a
// whole account and sorts it where an index would hand over the newest 200 rows (a trades page took
// 130–320 ms; 2 ms with statistics). This does autovacuum's analyze half, with its default rule — a
// table whose rows changed more than 50 + 10 % of its rows since its last analyze — after writes.
import { sql } from 'kysely';
import type { Db } from './types.ts';

/** Autovacuum's default analyze rule: a table whose rows changed more than 50 + 10 % of its rows since its last analyze. */
export const ANALYZE_RULE = { baseRows: 50, share: 0.1 } as const;

export interface StatisticsKeeper {
  /** A write has committed: check (once, after whatever check is running) and analyze what changed enough. */
  afterWrite(): void;
  /** Resolves when no check is running (tests, shutdown). */
  idle(): Promise<void>;
}

export function keepStatistics(db: Db, onError: (err: unknown) => void): StatisticsKeeper {
  let running: Promise<void> | undefined;
  let again = false;
  const check = async (): Promise<void> => {
    // Counters reach the shared statistics at most once a second unless asked.
    await sql`select pg_stat_force_next_flush()`.execute(db);
    const { rows } = await sql<{ relname: string }>`select relname from pg_stat_user_tables
      where schemaname = current_schema() and n_mod_since_analyze > ${sql.lit(ANALYZE_RULE.baseRows)} + ${sql.lit(ANALYZE_RULE.share)} * n_live_tup`.execute(
      db,
    );
    for (const r of rows) await sql`analyze ${sql.id(r.relname)}`.execute(db);
  };
  const run = (): void => {
    running = check()
      .catch(onError)
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          run();
        }
      });
  };
  return {
    afterWrite: () => {
      if (running !== undefined) again = true;
      else run();
    },
    idle: async () => {
      while (running !== undefined) await running;
    },
  };
}
