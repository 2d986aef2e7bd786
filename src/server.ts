import type http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { createDeps } from './deps.ts';
import { buildApp } from './app.ts';
import { sweepCrashedTurns } from './features/conversations/crashed-turns.ts';
import { DataDirLockedError } from './platform/data-dir-lock.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..');

/** A start refused for a reason the operator can fix: one message, exit 1, no stack. */
function refuse(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/** Errors of the listen call an operator causes (and fixes) with PORT / HOST. */
const LISTEN_PROBLEMS: Record<string, string> = {
  EADDRINUSE: 'is already in use (another process listens there): stop it or set PORT to a free port',
  EACCES: 'may not be opened by this user (ports below 1024 need privileges): set PORT to 1024 or above',
  EADDRNOTAVAIL: 'is not an address of this machine: set HOST to one of its addresses (or 0.0.0.0)',
};

/**
 * Why the database DATABASE_URL names cannot be used, in a line (no password), or undefined for an
 * error that is not the operator's to fix.
 */
function databaseProblem(err: unknown, config: Config): string | undefined {
  if (config.databaseUrl === undefined) return undefined;
  const { code, message } = err as { code?: unknown; message?: unknown };
  const reasons: Record<string, string> = {
    '3D000': 'names a database that does not exist: create it (createdb) or name another',
    '28P01': 'has a user or password the server refuses',
    '28000': 'has a user the server refuses',
    ECONNREFUSED: 'names a server that is not running there (nothing listens on that host and port)',
    ENOTFOUND: 'names a host that is not known',
    EAI_AGAIN: 'names a host that could not be looked up',
    ETIMEDOUT: 'names a server that does not answer',
    EHOSTUNREACH: 'names a host that cannot be reached',
  };
  const reason = typeof code === 'string' ? reasons[code] : undefined;
  if (reason === undefined) return undefined;
  const u = new URL(config.databaseUrl);
  const where = `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  return `Cannot use DATABASE_URL (${where}): it ${reason} (${typeof message === 'string' ? message : String(code)}).`;
}

/** Whether HOST and PORT can be listened on, asked before any database is opened (a fixed port only). */
async function listenProblem(config: Config): Promise<string | undefined> {
  if (config.port === 0) return undefined;
  const probe = net.createServer();
  return new Promise((resolve) => {
    probe.once('error', (err: NodeJS.ErrnoException) => {
      const problem = LISTEN_PROBLEMS[err.code ?? ''];
      resolve(problem === undefined ? undefined : `Cannot listen on HOST ${config.host} PORT ${config.port}: the address ${problem}.`);
    });
    probe.listen({ port: config.port, host: config.host, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) refuse(err.message);
    throw err;
  }
  const busy = await listenProblem(config);
  if (busy !== undefined) refuse(busy);
  let deps;
  try {
    deps = await createDeps(config);
  } catch (err) {
    if (err instanceof ConfigError || err instanceof DataDirLockedError) refuse(err.message);
    const problem = databaseProblem(err, config);
    if (problem !== undefined) refuse(problem);
    throw err;
  }
  const app = await buildApp(deps);
  let address: string;
  try {
    address = await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    const problem = LISTEN_PROBLEMS[(err as NodeJS.ErrnoException).code ?? ''];
    if (problem === undefined) throw err;
    await app.close();
    await deps.close();
    refuse(`Cannot listen on HOST ${config.host} PORT ${config.port}: the address ${problem}.`);
  }
  const log = deps.logger;
  // Settles the turns of a crashed (or frozen) instance: no sign of life for RESERVATION_SWEEP_AFTER_MS
  // (10 min by default; a running turn shows one at every heartbeat, however long it runs).
  let sweeping = false;
  const sweeper = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    sweepCrashedTurns(deps, config.reservationSweepAfterMs)
      .catch((err: unknown) => log.error({ err }, 'sweeping crashed turns failed'))
      .finally(() => (sweeping = false));
  }, config.reservationSweepIntervalMs);
  sweeper.unref();
  if (!config.databaseUrl) {
    log.warn(`embedded database (PGlite) in ${config.dataDir}/pgdata: for local use; set DATABASE_URL for production`);
  }
  log.info({ address, docs: `${address}/docs` }, 'advisor service listening');
  process.stdout.write(
    [
      '',
      `  Advisor service listening on ${address}`,
      `  Web client:      ${address}/${config.localSignIn ? '   (local sign-in: any user id)' : ''}`,
      `  API reference:   ${address}/docs   (OpenAPI: ${address}/openapi.json)`,
      `  Mint a token:    ${tokenCommand(config)}      then: curl -H "Authorization: Bearer <token>" ${address}/api/accounts`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    clearInterval(sweeper);
    log.info({ signal, liveStreams: deps.lifecycle.liveStreams }, 'draining');
    closeKeptAliveConnections(app.server);
    await deps.lifecycle.drain(config.shutdownDrainMs);
    // Streams are stored and ended by now; whatever is still open (a request whose body trickles in,
    // a client that never reads its answer) is cut rather than waited for, so the exit is bounded.
    app.server.closeAllConnections();
    await app.close();
    await deps.close();
    log.info('stopped');
    log.flush(() => process.exit(0));
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

/**
 * From the start of the drain on, every answer closes its connection (`Connection: close`) and the idle
 * ones are closed now, not when the process exits: a proxy keeping connections to this instance
 * (deploy/nginx.conf) stops reusing them while the drain lasts, instead of sending a request into one
 * just as the exit closes it (nginx's "upstream prematurely closed connection", a 502 to a client).
 */
function closeKeptAliveConnections(server: http.Server): void {
  server.prependListener('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.shouldKeepAlive = false;
  });
  server.closeIdleConnections();
}

/**
 * How to mint a token this process accepts: `npm run token` reads the same settings (scripts/token.ts
 * loads the same configuration), so it needs the same DATA_DIR when the secret was generated there,
 * or the same AUTH_JWT_SECRET.
 */
function tokenCommand(config: Config): string {
  if (config.auth.jwksUrl !== undefined) return `tokens come from the identity provider (AUTH_JWKS_URL, issuer ${config.auth.issuer ?? ''})`;
  if (config.auth.jwtSecret !== undefined) return "AUTH_JWT_SECRET=<this process's AUTH_JWT_SECRET> npm run -s token -- <userId>";
  const defaultDir = path.join(PROJECT_ROOT, 'data');
  const dataDir = config.dataDir === defaultDir ? '' : `DATA_DIR=${shellWord(config.dataDir)} `;
  return `${dataDir}npm run -s token -- <userId>`;
}

/** A value as one shell word. */
function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

await main();
