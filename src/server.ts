import { ConfigError, loadConfig } from './config.ts';
import { createDeps } from './deps.ts';
import { buildApp } from './app.ts';
import { sweepCrashedTurns } from './features/conversations/crashed-turns.ts';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const deps = await createDeps(config);
  const app = await buildApp(deps);
  const address = await app.listen({ port: config.port, host: config.host });
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
      `  Mint a token:    npm run token -- <userId>      then: curl -H "Authorization: Bearer <token>" ${address}/api/accounts`,
      '',
    ].join('\n'),
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    clearInterval(sweeper);
    log.info({ signal, liveStreams: deps.lifecycle.liveStreams }, 'draining');
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

await main();
