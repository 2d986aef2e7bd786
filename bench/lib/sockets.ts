// Requests made to the stores. Round trips a process makes to a store, counted by the kernel: the data
// segments it has sent on its established TCP connections to a port (`ss -tinp`, Linux). A request
// written in one write(2) (a pg query with its Sync, a Redis command or a pipeline of them) is one
// segment on loopback, so the difference between two readings is the requests sent in between. A
// connection closed in between takes its count with it (the service's pools keep theirs open). And
// the stores' own counts: Redis commands (INFO commandstats), PostgreSQL commits (pg_stat_database).
import { execFileSync } from 'node:child_process';
import type { Redis } from 'ioredis';
import type pg from 'pg';

/** Data segments `pid` has sent so far on its established connections to each port; undefined without `ss`. */
export function segmentsSent(pid: number, ports: readonly number[]): Map<number, number> | undefined {
  let out: string;
  try {
    const filter = ports.flatMap((p, i) => [...(i > 0 ? ['or'] : []), 'dport', '=', `:${p}`]);
    out = execFileSync('ss', ['-tinpH', 'state', 'established', '(', ...filter, ')'], { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 });
  } catch {
    return undefined;
  }
  const sent = new Map<number, number>(ports.map((p) => [p, 0]));
  // Each socket is a line `recv-q send-q local peer users:(("node",pid=…,fd=…))` and, indented under
  // it, its tcp_info (`… data_segs_out:N …`).
  let port: number | undefined;
  for (const line of out.split('\n')) {
    if (!/^\s/.test(line)) {
      const fields = line.trim().split(/\s+/);
      const peerPort = Number(/:(\d+)$/.exec(fields[3] ?? '')?.[1]);
      port = line.includes(`pid=${pid},`) && sent.has(peerPort) ? peerPort : undefined;
      continue;
    }
    if (port === undefined) continue;
    const segs = Number(/\bdata_segs_out:(\d+)/.exec(line)?.[1] ?? 0);
    sent.set(port, (sent.get(port) ?? 0) + segs);
    port = undefined;
  }
  return sent;
}

/** Calls so far of each Redis command (INFO commandstats), those its scripts run included. */
export async function commandCalls(redis: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] ?? '', Number(m[2]));
  return calls;
}

/** Calls of each command between two readings of commandCalls, the second reading's own INFO left out. */
export function commandsBetween(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): Map<string, number> {
  const calls = new Map<string, number>();
  for (const [name, n] of after) {
    const d = n - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0);
    if (d > 0) calls.set(name, d);
  }
  return calls;
}

/** Transactions committed so far in the pool's database (pg_stat_database; its statistics lag up to a second). */
export async function commitsSoFar(pool: pg.Pool): Promise<number> {
  const r = await pool.query<{ n: string }>('select xact_commit as n from pg_stat_database where datname = current_database()');
  return Number(r.rows[0]?.n ?? NaN);
}
