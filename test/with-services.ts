// Runs a test command beside services of its own, started here and stopped when it ends (DESIGN §15):
//
//   node test/with-services.ts redis-cluster [pgbouncer] -- <command …>
//
// - redis-cluster: a Redis Cluster of three masters (redis-server --cluster-enabled, redis-cli --cluster
//   create) on free ports; the command gets REDIS_CLUSTER_NODES (and no REDIS_URL).
// - pgbouncer: Debian's PgBouncer in transaction mode in front of DATABASE_URL's server; the command
//   gets TEST_DATABASE_POOLER_URL (the multi-instance suites send their instances' statements through
//   it) and DATABASE_PREPARED_STATEMENTS=false.
//
// The command runs in a shell, so a phase can chain several test runs. The exit code is the command's.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { startPgBouncer } from './helpers/pgbouncer.ts';
import { startOwnRedis } from './helpers/own-redis.ts';

const SERVICES = ['redis-cluster', 'pgbouncer'] as const;
type Service = (typeof SERVICES)[number];

const split = process.argv.indexOf('--');
const services = process.argv.slice(2, split < 0 ? undefined : split);
const command = split < 0 ? [] : process.argv.slice(split + 1);
const unknown = services.filter((s) => !(SERVICES as readonly string[]).includes(s));
if (command.length === 0 || services.length === 0 || unknown.length > 0) {
  process.stderr.write(
    `usage: node test/with-services.ts ${SERVICES.join('|')}… -- <command>${unknown.length > 0 ? ` (unknown: ${unknown.join(', ')})` : ''}\n`,
  );
  process.exit(2);
}

const env: Record<string, string | undefined> = { ...process.env };
const stops: (() => Promise<void>)[] = [];
const stopAll = async (): Promise<void> => {
  for (const stop of stops.splice(0).reverse()) await stop().catch((err: unknown) => process.stderr.write(`stopping a service: ${String(err)}\n`));
};

async function start(service: Service): Promise<void> {
  if (service === 'redis-cluster') {
    const redis = await startOwnRedis({ cluster: true, proxied: false });
    stops.push(() => redis.stop());
    delete env['REDIS_URL'];
    Object.assign(env, redis.env);
    process.stdout.write(`# Redis Cluster of three masters: REDIS_CLUSTER_NODES=${redis.env['REDIS_CLUSTER_NODES']}\n`);
    return;
  }
  const databaseUrl = env['DATABASE_URL'];
  if (!databaseUrl) throw new Error('pgbouncer needs DATABASE_URL (the PostgreSQL server it pools)');
  const bouncer = await startPgBouncer(databaseUrl);
  stops.push(() => bouncer.stop());
  env['TEST_DATABASE_POOLER_URL'] = bouncer.url;
  env['DATABASE_PREPARED_STATEMENTS'] = 'false';
  process.stdout.write(`# PgBouncer (transaction mode): TEST_DATABASE_POOLER_URL=${bouncer.url}\n`);
}

let code = 1;
try {
  for (const service of services as Service[]) await start(service);
  const child = spawn(command.join(' '), { env, stdio: 'inherit', shell: true });
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  process.on('SIGINT', forward('SIGINT')).on('SIGTERM', forward('SIGTERM'));
  const [exitCode, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  code = exitCode ?? (signal ? 1 : 0);
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
} finally {
  await stopAll();
}
process.exit(code);
