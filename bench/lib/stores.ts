// The run's own stores: a fresh PostgreSQL database (dropped at the end) and a redis-server on a free
// loopback port (stopped at the end), as test/cluster/cluster.ts does, without its cuttable proxies.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ensureDatabase } from '../../test/helpers/database.ts';
import { unusedPort } from '../../test/helpers/net.ts';
import type { Procs } from './procs.ts';

export interface Stores {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  /** The redis-server process (to read its CPU time). */
  readonly redisPid: number;
  readonly pool: pg.Pool;
  readonly postgresVersion: string;
  close(): Promise<void>;
}

export async function startStores(procs: Procs, adminUrl: string): Promise<Stores> {
  const dbName = `advisor_bench_${randomBytes(5).toString('hex')}`;
  // DATABASE_URL may name a database not made yet (a fresh server has only `postgres`).
  await ensureDatabase(adminUrl);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  let postgresVersion: string;
  try {
    postgresVersion = String((await admin.query<{ server_version: string }>('show server_version')).rows[0]?.server_version ?? 'unknown');
    await admin.query(`create database ${dbName}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  const databaseUrl = url.toString();
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  pool.on('error', () => undefined);

  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await pool.end().catch(() => undefined);
    const a = new pg.Client({ connectionString: adminUrl });
    await a.connect();
    try {
      await a.query(`drop database if exists ${dbName} with (force)`);
    } finally {
      await a.end();
    }
  };
  try {
    const port = await unusedPort();
    const redis = await procs.startBinary('redis', 'redis-server', {
      env: { PATH: process.env.PATH ?? '' },
      args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxclients', '10000'],
      ready: /(Ready to accept connections)/,
    });
    return { databaseUrl, redisUrl: `redis://127.0.0.1:${port}`, redisPid: redis.pid, pool, postgresVersion, close };
  } catch (err) {
    await close();
    throw err;
  }
}
