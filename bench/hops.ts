// What one round trip to each of the service's neighbours costs on this machine, back to back and
// paced (a random pause before each, exponential with mean --think-ms, as the key-save bench's users
// wait): a Redis PING, a PostgreSQL `select 1`, a one-row upsert with its commit (with
// synchronous_commit on, then off, to show the WAL flush), and an HTTP request to a node:http server.
// A floor under any request that makes those hops; not a test of the service.
//   npx node bench/hops.ts [--think-ms 50] [--n 300]   (DATABASE_URL / REDIS_URL, default 127.0.0.1)
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Pool } from 'undici';
import { distribution, ms } from './lib/stats.ts';

const { values } = parseArgs({ options: { 'think-ms': { type: 'string', default: '50' }, n: { type: 'string', default: '300' } } });
const thinkMs = Number(values['think-ms']);
const n = Number(values.n);
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test', max: 1 });
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('{"ok":true}'));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const http1 = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 1 });
// A real table: a temporary one writes no WAL, so its commit would flush nothing. Dropped at the end.
const table = `bench_hops_${process.pid}`;
await db.query(`create table ${table} (id int primary key, v text)`);
const upsert = () =>
  db.query({ name: 'hops-upsert', text: `insert into ${table} values (1, $1) on conflict (id) do update set v = excluded.v`, values: [String(Math.random())] });

const hops: [string, () => Promise<unknown>][] = [
  ['Redis PING', () => redis.ping()],
  ['PostgreSQL select 1', () => db.query('select 1')],
  ['upsert + commit', upsert],
  ['upsert, synchronous_commit off', upsert],
  ['HTTP GET (undici → node:http)', async () => (await http1.request({ method: 'GET', path: '/' })).body.dump()],
];
process.stdout.write(`| hop | back to back p50 ms | p90 | paced (think ${thinkMs} ms) p50 ms | p90 |\n|---|---|---|---|---|\n`);
try {
  for (const [name, op] of hops) {
    await db.query(`set synchronous_commit = ${name.includes('off') ? 'off' : 'on'}`);
    const cells: string[] = [];
    for (const pause of [0, thinkMs]) {
      for (let i = 0; i < 200; i++) await op();
      const xs: number[] = [];
      for (let i = 0; i < n; i++) {
        if (pause > 0) await delay(-pause * Math.log(1 - Math.random()));
        const t = performance.now();
        await op();
        xs.push(performance.now() - t);
      }
      const d = distribution(xs);
      cells.push(ms(d.p50, 3), ms(d.p90, 3));
    }
    process.stdout.write(`| ${name} | ${cells.join(' | ')} |\n`);
  }
} finally {
  redis.disconnect();
  await db.query(`drop table ${table}`);
  await db.end();
  await http1.close();
  server.close();
}
