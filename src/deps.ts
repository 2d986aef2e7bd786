import type { Logger } from 'pino';
import { createAuthenticator, type Authenticator } from './http/auth.ts';
import { ConfigError, type Config } from './config.ts';
import { createDb, type DbHandle, type PgliteStart } from './db/create-db.ts';
import { migrateToLatest } from './db/migrate.ts';
import { rebuildOldBooks } from './features/journal/rebuild.ts';
import type { Db } from './db/types.ts';
import { createLogger } from './logger.ts';
import { systemClock, type Clock } from './platform/clock.ts';
import { timeOrderedIds, type Ids } from './platform/ids.ts';
import { Lifecycle } from './platform/lifecycle.ts';
import { createMetrics, type Metrics } from './platform/metrics.ts';
import { createTracing, type Tracing } from './platform/tracing.ts';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { RateLimiter } from './platform/rate-limiter.ts';
import type { StreamLeases } from './platform/stream-lease.ts';
import type { FrameLog } from './platform/frame-log.ts';
import type { Vault } from './platform/vault.ts';
import { createVault, loadOrCreateKeyring, loadOrCreateSecret, type Keyring } from './platform/aes-vault.ts';
import { createCoordination, type Coordination } from './platform/coordination.ts';
import { admitInTurn, openStreams, type Admission, type OpenStreams } from './platform/admission.ts';
import path from 'node:path';
import { createTurnBilling, markTurnsAlive, type TurnBilling } from './features/billing/turn-billing.ts';
import { sealedKeyIds } from './features/advisor-keys/repo.ts';
import { StreamRuntime } from './features/conversations/stream-runtime.ts';
import { createLlm, createUpstreamAgent, type Llm } from './providers/llm/index.ts';
import { createMarketData, type MarketData } from './providers/market-data/index.ts';
import { createStripePayments, type PaymentsClient } from './providers/payments/stripe.ts';

/** Everything the app needs, built in one place; tests build the same with overrides. */
export interface Deps {
  readonly config: Config;
  readonly logger: Logger;
  readonly db: Db;
  readonly dbKind: 'postgres' | 'pglite';
  readonly clock: Clock;
  readonly ids: Ids;
  readonly vault: Vault;
  readonly limiter: RateLimiter;
  readonly leases: StreamLeases;
  /** A stream request's rate-limit verdict and lease, asked for together (DESIGN §4). */
  readonly admission: Admission;
  /** DESIGN §12: every live turn's frames, readable from any instance. */
  readonly frames: FrameLog;
  readonly auth: Authenticator;
  readonly metrics: Metrics;
  readonly lifecycle: Lifecycle;
  /** Users known to exist (per process), so auth writes a user once. */
  readonly seenUsers: Set<string>;
  /** How advisor turns are paid (DESIGN §8). */
  readonly billing: TurnBilling;
  /** The language-model providers: a streamed chat round, a key probe. */
  readonly llm: Llm;
  /** The configured market-data provider. */
  readonly marketData: MarketData;
  /** The payment processor; undefined when none is configured (billing not available). */
  readonly payments: PaymentsClient | undefined;
  /** What this app's advisor streams share: their timers, the verdicts in flight. */
  readonly streams: StreamRuntime;
  /** DESIGN §16: this instance's stream connections, at most MAX_OPEN_STREAMS. */
  readonly openStreams: OpenStreams;
  /** DESIGN §16: this app's tracer (off unless OTEL_EXPORTER_OTLP_ENDPOINT is set). */
  readonly tracing: Tracing;
  close(): Promise<void>;
}

/** The outside systems and seams a test may wrap or replace; each gets the real one built from the config. */
export interface DepsOverrides {
  readonly billing?: (real: TurnBilling) => TurnBilling;
  readonly llm?: (real: Llm) => Llm;
  readonly marketData?: (real: MarketData) => MarketData;
  readonly payments?: (real: PaymentsClient | undefined) => PaymentsClient | undefined;
  readonly leases?: (real: StreamLeases) => StreamLeases;
}

export interface DepsOptions {
  readonly clock?: Clock;
  readonly ids?: Ids;
  readonly logger?: Logger;
  /** PGlite directory override ('memory://' in tests). */
  readonly pgliteDir?: string;
  /** What the embedded database starts from (tests: a migrated dump; create-db.ts). */
  readonly pgliteStart?: PgliteStart;
  /** PostgreSQL schema to isolate a test app in. */
  readonly dbSchema?: string;
  /** Prefix of every Redis key (isolates tests sharing one Redis). */
  readonly redisPrefix?: string;
  readonly skipMigrations?: boolean;
  /**
   * Embedded mode has one database in one process: a second app instance in the same process (tests)
   * shares the first one's database and in-process limits and leases instead of opening its own.
   */
  readonly shareEmbeddedWith?: Deps;
  readonly overrides?: DepsOverrides;
  /** Spans go here (tests: an in-memory exporter), whatever OTEL_EXPORTER_OTLP_ENDPOINT says. */
  readonly spanExporter?: SpanExporter;
}

export async function createDeps(config: Config, opts: DepsOptions = {}): Promise<Deps> {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const clock = opts.clock ?? systemClock;
  const warn = (msg: string) => logger.warn(msg);
  const owner = opts.shareEmbeddedWith;
  const metrics = createMetrics();
  const handle: DbHandle = owner
    ? { db: owner.db, kind: owner.dbKind, close: async () => undefined }
    : await createDb({
        databaseUrl: config.databaseUrl,
        poolSize: config.databasePoolSize,
        poolIdleMs: config.databasePoolIdleMs,
        connectTimeoutMs: config.databaseConnectTimeoutMs,
        statementTimeoutMs: config.databaseStatementTimeoutMs,
        preparedStatements: config.databasePreparedStatements,
        statementFunctions: config.databaseStatementFunctions,
        sessionUrl: config.databaseListenUrl,
        pgliteDir: opts.pgliteDir ?? path.join(config.dataDir, 'pgdata'),
        ...(opts.pgliteStart ? { pgliteStart: opts.pgliteStart } : {}),
        ...(opts.dbSchema ? { schema: opts.dbSchema } : {}),
        onPoolError: (err) => logger.warn({ err: err.message }, 'database connection lost; it will be replaced'),
        onPoolWait: (seconds) => metrics.dbPoolWait.observe(seconds),
      });
  if (!opts.skipMigrations && !owner) {
    await migrateToLatest(handle.db);
    const rebuilt = await rebuildOldBooks(handle.db);
    if (rebuilt > 0) logger.info({ symbols: rebuilt }, 'journal: round trips written for books kept before they were');
  }
  const keyring = loadOrCreateKeyring(config.encryptionKeys, config.dataDir, warn);
  if (!opts.skipMigrations && !owner) {
    try {
      await refuseKeyringThatReadsNoKey(handle.db, keyring, config);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }
  const vault = createVault(keyring);
  const jwtSecret = tokenSecret(config, warn) ?? '';
  const coordination: Coordination = owner
    ? { limiter: owner.limiter, leases: owner.leases, admission: owner.admission, frames: owner.frames, store: 'memory', close: async () => undefined }
    : createCoordination(
        config,
        handle.db,
        clock,
        opts.redisPrefix ?? 'advisor:',
        (err, what) => logger.warn({ err }, `${what} failed`),
        (seconds) => metrics.frameLogWrite.observe(seconds),
      );
  // Stops and attaches from other instances are heard from the first request on.
  await coordination.frames.ready(2000);
  const ids = opts.ids ?? timeOrderedIds;
  const tracing = await createTracing(metrics, config.otelEndpoint, opts.spanExporter);
  // Keep-alive connections to the providers, shared by chat rounds and key probes.
  const upstream = createUpstreamAgent();
  const llm = createLlm({
    baseUrls: config.providerBaseUrls,
    idleTimeoutMs: config.streamIdleTimeoutMs,
    probeTimeoutMs: config.providerProbeTimeoutMs,
    agent: upstream,
  });
  const marketData = createMarketData({
    provider: config.marketData.provider,
    baseUrl: config.marketData.baseUrl,
    probeTimeoutMs: config.marketDataProbeTimeoutMs,
    agent: upstream,
  });
  const billingDeps = { db: handle.db, clock, config, logger, metrics, ids };
  const billing = createTurnBilling(billingDeps);
  const payments = createStripePayments(config.stripe);
  const over = opts.overrides ?? {};
  const leases = over.leases ? over.leases(coordination.leases) : coordination.leases;
  return {
    config,
    logger,
    db: handle.db,
    dbKind: handle.kind,
    clock,
    ids,
    vault,
    limiter: coordination.limiter,
    leases,
    // Leases a test wraps are asked for through the wrapper.
    admission: over.leases ? admitInTurn(coordination.limiter, leases) : coordination.admission,
    frames: coordination.frames,
    auth: createAuthenticator({ ...config.auth, jwtSecret, localSignIn: config.localSignIn }, clock),
    metrics,
    lifecycle: new Lifecycle(),
    seenUsers: new Set(),
    billing: over.billing ? over.billing(billing) : billing,
    llm: over.llm ? over.llm(llm) : llm,
    marketData: over.marketData ? over.marketData(marketData) : marketData,
    payments: over.payments ? over.payments(payments) : payments,
    streams: new StreamRuntime(config.streamHeartbeatMs, {
      markAlive: (turnIds) => markTurnsAlive(billingDeps, turnIds),
      onError: (err) => logger.warn({ err }, 'marking running turns alive failed'),
    }),
    openStreams: openStreams(config, metrics, logger),
    tracing,
    async close() {
      await tracing.shutdown().catch((err: unknown) => logger.warn({ err }, 'sending the last spans failed'));
      // Streams have ended or been stopped by now; whatever upstream call is left is cut.
      await upstream.destroy();
      await coordination.close();
      await handle.close();
    },
  };
}

/**
 * The HS256 secret tokens are signed and verified with: AUTH_JWT_SECRET, else (the embedded default)
 * the one generated into DATA_DIR; undefined when tokens come from AUTH_JWKS_URL (which then decides). The server and
 * `npm run token` both take it from here.
 */
export function tokenSecret(config: Config, warn: (msg: string) => void): string | undefined {
  if (config.auth.jwksUrl !== undefined) return undefined;
  return config.auth.jwtSecret ?? loadOrCreateSecret('jwt-secret', config.dataDir, warn);
}

/**
 * DESIGN §10: a keyring holding none of the key ids the stored keys are sealed under could read none
 * of them (an instance started with another deployment's ENCRYPTION_KEYS): the start is refused. One
 * id in common is enough (a rotation in progress, a rewrap not yet run).
 */
async function refuseKeyringThatReadsNoKey(db: Db, keyring: Keyring, config: Config): Promise<void> {
  const used = await sealedKeyIds(db);
  const held = new Set(keyring.keys.map((k) => k.id));
  if (used.length === 0 || used.some((id) => held.has(id))) return;
  const source = config.encryptionKeys === undefined ? `ENCRYPTION_KEYS (unset: the keyring generated in ${config.dataDir})` : 'ENCRYPTION_KEYS';
  const shown = used.length > 10 ? [...used.slice(0, 10), `… ${used.length - 10} more`] : used;
  throw new ConfigError([
    `${source} holds none of the key ids the database's stored keys are sealed under (${shown.join(', ')}; ` +
      `the keyring holds ${[...held].join(', ')}): no stored key could be read. Start with the keyring the other instances use.`,
  ]);
}
