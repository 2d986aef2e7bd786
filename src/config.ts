import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Value } from 'typebox/value';
import {
  BUILT_IN_CATALOGUE,
  CatalogueSchema,
  CreditPacksSchema,
  PROVIDERS,
  catalogueProblems,
  type Catalogue,
  type Provider,
} from './catalogue.ts';

const PROVIDER_PUBLIC_BASE_URLS: Record<Provider, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
  google: 'https://generativelanguage.googleapis.com/v1beta',
  mistral: 'https://api.mistral.ai/v1',
  xai: 'https://api.x.ai/v1',
  groq: 'https://api.groq.com/openai/v1',
  deepseek: 'https://api.deepseek.com/v1',
  openrouter: 'https://openrouter.ai/api/v1',
};

export const MARKET_DATA_PROVIDERS = ['polygon', 'fmp'] as const;
export type MarketDataProvider = (typeof MARKET_DATA_PROVIDERS)[number];
const MARKET_DATA_PUBLIC_BASE_URLS: Record<MarketDataProvider, string> = {
  polygon: 'https://api.polygon.io',
  fmp: 'https://financialmodelingprep.com/stable',
};

/** What 4 maximal images (base64) and a maximal text need, plus room for JSON framing. */
export const BODY_CAP_FLOOR = 4 * 4_500_000 + 50_000 * 4 + 64 * 1024;

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  readonly redisUrl: string | undefined;
  /** PostgreSQL connections this instance may hold at once. */
  readonly databasePoolSize: number;
  /** How long a pooled PostgreSQL connection may sit unused before it is closed; 0 = never. */
  readonly databasePoolIdleMs: number;
  /** How long opening a PostgreSQL connection (or waiting for a free one) may take. */
  readonly databaseConnectTimeoutMs: number;
  /** How long one PostgreSQL statement may run; migrations are exempt. */
  readonly databaseStatementTimeoutMs: number;
  /** Raw keyring spec; undefined = generate/load DATA_DIR/encryption-keys. */
  readonly encryptionKeys: string | undefined;
  readonly auth: {
    readonly jwtSecret: string | undefined;
    readonly jwksUrl: string | undefined;
    readonly issuer: string | undefined;
    readonly audience: string | undefined;
    /** Token claim whose value sets the user's tier (when it names a catalogue tier); undefined = none. */
    readonly tierClaim: string | undefined;
  };
  readonly providerBaseUrls: Readonly<Record<Provider, string>>;
  readonly marketData: { readonly provider: MarketDataProvider; readonly baseUrl: string };
  readonly stripe: {
    readonly secretKey: string | undefined;
    readonly webhookSecret: string | undefined;
    readonly apiBase: string | undefined;
  };
  /**
   * The embedded default (no DATABASE_URL, generated JWT secret, no JWKS) listening on loopback: the
   * web client may sign in as any user id (DESIGN §2). Off everywhere else.
   */
  readonly localSignIn: boolean;
  /** Where the hosted checkout returns when the page's own origin is not one of `allowedOrigins`. */
  readonly checkoutSuccessUrl: string;
  readonly checkoutCancelUrl: string;
  /**
   * Origins the web client may be opened on (no path, no trailing slash): a checkout started from one
   * of them returns to it (the configured return URL's path on that origin); any other origin gets the
   * configured URL. Never a redirect to an origin the operator did not name.
   */
  readonly allowedOrigins: readonly string[];
  readonly catalogue: Catalogue;
  readonly logLevel: string;
  /** Bearer token /metrics requires when set; unset = /metrics answers loopback clients only. */
  readonly metricsToken: string | undefined;
  readonly providerProbeTimeoutMs: number;
  readonly marketDataProbeTimeoutMs: number;
  readonly streamHeartbeatMs: number;
  readonly streamIdleTimeoutMs: number;
  /** DESIGN §10: a stream client that reads nothing for this long while frames wait is treated as gone. */
  readonly streamStallTimeoutMs: number;
  /** DESIGN §10: a turn running longer ends with UPSTREAM_TIMEOUT. */
  readonly streamMaxDurationMs: number;
  /** DESIGN §12: how long a turn runs on with no client attached; 0 = stopped as its last client goes. */
  readonly streamDetachGraceMs: number;
  /** DESIGN §12: how long a turn's frame log is kept after its terminal frame. */
  readonly streamLogRetentionMs: number;
  /** DESIGN §12: frames a turn's log holds beyond its snapshot. */
  readonly streamLogMaxBytes: number;
  readonly shutdownDrainMs: number;
  readonly maxImageBytes: number;
  readonly maxBodyBytes: number;
  /** Headers and body of a request must arrive within this, else 408 and the connection is closed. */
  readonly requestTimeoutMs: number;
  /** Characters of earlier conversation sent to the provider as context. */
  readonly contextBudgetChars: number;
  /** Tool calls an advisor turn may run; then one last round without tools (DESIGN §11). */
  readonly advisorMaxToolCalls: number;
  /** Deadline of one market-data call made by a tool. */
  readonly marketDataTimeoutMs: number;
  /** Age after which a turn reservation still open is settled as not produced (its instance crashed). */
  readonly reservationSweepAfterMs: number;
  /** How often each instance looks for such reservations. */
  readonly reservationSweepIntervalMs: number;
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Env = Record<string, string | undefined>;

/** Loads and validates configuration once; every problem is reported, named by its variable. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const str = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const int = (name: string, def: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const raw = str(name);
    if (raw === undefined) return def;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name} must be an integer between ${min} and ${max} (got "${raw}")`);
      return def;
    }
    return n;
  };
  const url = (name: string, def: string | undefined): string | undefined => {
    const raw = str(name);
    if (raw === undefined) return def;
    try {
      const u = new URL(raw);
      if (!/^(https?|postgres(ql)?|rediss?):$/.test(u.protocol)) throw new Error('protocol');
      return raw.replace(/\/+$/, '');
    } catch {
      problems.push(`${name} must be a URL (got "${raw}")`);
      return def;
    }
  };

  const providerBaseUrls = Object.fromEntries(
    PROVIDERS.map((p) => [p, url(`${p.toUpperCase()}_BASE_URL`, PROVIDER_PUBLIC_BASE_URLS[p]) ?? PROVIDER_PUBLIC_BASE_URLS[p]]),
  ) as Record<Provider, string>;

  const mdRaw = str('MARKET_DATA_PROVIDER') ?? 'polygon';
  const mdProvider = (MARKET_DATA_PROVIDERS as readonly string[]).includes(mdRaw) ? (mdRaw as MarketDataProvider) : undefined;
  if (!mdProvider) problems.push(`MARKET_DATA_PROVIDER must be one of ${MARKET_DATA_PROVIDERS.join(', ')} (got "${mdRaw}")`);
  const marketDataProvider = mdProvider ?? 'polygon';

  const catalogue = loadCatalogue(str('CONFIG_FILE'), str('CREDIT_PACKS'), problems);

  const logLevel = str('LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    problems.push(`LOG_LEVEL must be a pino level (got "${logLevel}")`);
  }

  const auth = authSettings(str, problems);

  const maxBodyBytes = int('MAX_BODY_BYTES', 20 * 1024 * 1024, 1);
  if (maxBodyBytes < BODY_CAP_FLOOR) {
    problems.push(`MAX_BODY_BYTES must be at least ${BODY_CAP_FLOOR} (4 maximal images and 50,000 characters)`);
  }

  const stripeSecretKey = str('STRIPE_SECRET_KEY');
  const stripeWebhookSecret = str('STRIPE_WEBHOOK_SECRET');
  // DESIGN §10: a service that sells packs but cannot verify the webhook that grants them loses every credit.
  if (stripeSecretKey !== undefined && stripeWebhookSecret === undefined) {
    problems.push('STRIPE_WEBHOOK_SECRET must be set with STRIPE_SECRET_KEY (without it no purchase could ever be credited)');
  }

  const metricsToken = str('METRICS_TOKEN');
  if (metricsToken !== undefined && !/^[\x21-\x7e]{16,512}$/.test(metricsToken)) {
    problems.push('METRICS_TOKEN must be 16 to 512 printable ASCII characters without spaces');
  }

  const port = int('PORT', 3000, 0, 65535);
  const host = str('HOST') ?? '127.0.0.1';
  const databaseUrl = url('DATABASE_URL', undefined);
  if (str('DATABASE_URL') !== undefined) sharedSecretProblems(str, problems);
  const loopback = LOOPBACK_HOSTS.test(host) || host === '::1';
  // The checkout returns to the web client this process serves, unless the operator names a front end.
  const selfOrigin = `http://${loopback || host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host}:${port}`;
  const checkoutSuccessUrl = url('CHECKOUT_SUCCESS_URL', `${selfOrigin}/billing/success?session_id={CHECKOUT_SESSION_ID}`) ?? '';
  const checkoutCancelUrl = url('CHECKOUT_CANCEL_URL', `${selfOrigin}/billing/cancel`) ?? '';
  const allowedOrigins = originList(str('ALLOWED_ORIGINS'), problems, [
    originOf(checkoutSuccessUrl),
    originOf(checkoutCancelUrl),
    // The names a browser on this machine may use for a loopback listener, all one server.
    ...(loopback ? ['localhost', '127.0.0.1', '[::1]'].map((h) => `http://${h}:${port}`) : []),
  ]);
  const config: Config = {
    port,
    host,
    dataDir: path.resolve(str('DATA_DIR') ?? './data'),
    databaseUrl,
    redisUrl: url('REDIS_URL', undefined),
    databasePoolSize: int('DATABASE_POOL_SIZE', 20, 1, 10_000),
    databasePoolIdleMs: int('DATABASE_POOL_IDLE_MS', 300_000, 0, 24 * 3_600_000),
    databaseConnectTimeoutMs: int('DATABASE_CONNECT_TIMEOUT_MS', 5000, 100, 600_000),
    databaseStatementTimeoutMs: int('DATABASE_STATEMENT_TIMEOUT_MS', 10_000, 100, 3_600_000),
    encryptionKeys: str('ENCRYPTION_KEYS'),
    auth,
    providerBaseUrls,
    marketData: {
      provider: marketDataProvider,
      baseUrl: url('MARKET_DATA_BASE_URL', MARKET_DATA_PUBLIC_BASE_URLS[marketDataProvider]) ?? MARKET_DATA_PUBLIC_BASE_URLS[marketDataProvider],
    },
    stripe: {
      secretKey: stripeSecretKey,
      webhookSecret: stripeWebhookSecret,
      apiBase: url('STRIPE_API_BASE', undefined),
    },
    localSignIn: loopback && databaseUrl === undefined && auth.jwtSecret === undefined && auth.jwksUrl === undefined,
    checkoutSuccessUrl,
    checkoutCancelUrl,
    allowedOrigins,
    catalogue,
    logLevel,
    metricsToken,
    providerProbeTimeoutMs: int('PROVIDER_PROBE_TIMEOUT_MS', 5000, 1, 120_000),
    marketDataProbeTimeoutMs: int('MARKET_DATA_PROBE_TIMEOUT_MS', 5000, 1, 120_000),
    streamHeartbeatMs: int('STREAM_HEARTBEAT_MS', 15_000, 10, 3_600_000),
    streamIdleTimeoutMs: int('STREAM_IDLE_TIMEOUT_MS', 60_000, 10, 3_600_000),
    streamStallTimeoutMs: int('STREAM_STALL_TIMEOUT_MS', 60_000, 10, 3_600_000),
    streamMaxDurationMs: int('STREAM_MAX_DURATION_MS', 900_000, 100, 24 * 3_600_000),
    streamDetachGraceMs: int('STREAM_DETACH_GRACE_MS', 30_000, 0, 3_600_000),
    streamLogRetentionMs: int('STREAM_LOG_RETENTION_MS', 600_000, 1000, 7 * 24 * 3_600_000),
    streamLogMaxBytes: int('STREAM_LOG_MAX_BYTES', 4 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    shutdownDrainMs: int('SHUTDOWN_DRAIN_MS', 25_000, 0, 3_600_000),
    maxImageBytes: int('MAX_IMAGE_BYTES', 3 * 1024 * 1024, 1, 3_375_000),
    maxBodyBytes,
    requestTimeoutMs: int('REQUEST_TIMEOUT_MS', 60_000, 100, 3_600_000),
    contextBudgetChars: int('CONTEXT_BUDGET_CHARS', 60_000, 1000),
    advisorMaxToolCalls: int('ADVISOR_MAX_TOOL_CALLS', 8, 0, 64),
    marketDataTimeoutMs: int('MARKET_DATA_TIMEOUT_MS', 10_000, 10, 120_000),
    reservationSweepAfterMs: int('RESERVATION_SWEEP_AFTER_MS', 10 * 60_000, 1000, 7 * 24 * 3_600_000),
    reservationSweepIntervalMs: int('RESERVATION_SWEEP_INTERVAL_MS', 30_000, 100, 3_600_000),
  };
  // A running turn shows it is alive every STREAM_HEARTBEAT_MS; the sweeper must wait for several missed ones.
  if (config.reservationSweepAfterMs < 3 * config.streamHeartbeatMs) {
    problems.push(
      `RESERVATION_SWEEP_AFTER_MS (${config.reservationSweepAfterMs}) must be at least 3 × STREAM_HEARTBEAT_MS (${config.streamHeartbeatMs}): ` +
        'a running turn shows it is alive at each heartbeat, and one without a sign of life that long is taken for crashed',
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/**
 * DESIGN §10: instances on one database must share the keyring and the token secret. A secret
 * generated per instance into its own DATA_DIR would make each refuse the others' tokens and unable to
 * read the keys they stored, so on PostgreSQL none is generated.
 */
function sharedSecretProblems(str: (name: string) => string | undefined, problems: string[]): void {
  if (str('ENCRYPTION_KEYS') === undefined) {
    problems.push(
      'ENCRYPTION_KEYS must be set with DATABASE_URL: every instance must share one keyring ' +
        '(a keyring generated per instance could not read the keys the others stored)',
    );
  }
  if (str('AUTH_JWT_SECRET') === undefined && str('AUTH_JWKS_URL') === undefined) {
    problems.push(
      'AUTH_JWT_SECRET (or AUTH_JWKS_URL) must be set with DATABASE_URL: every instance must share the token secret ' +
        '(a secret generated per instance would refuse the tokens the others accept)',
    );
  }
}

const LOOPBACK_HOSTS = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** `scheme://host[:port]` of an http(s) URL, as a browser sends it in `Origin`; with `exact`, of a URL that is nothing more. */
function originOf(raw: string, exact = false): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
  if (exact && (u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '')) return undefined;
  return u.origin;
}

/**
 * ALLOWED_ORIGINS (comma-separated origins, each `scheme://host[:port]`) beside the origins the service
 * allows by itself: its checkout URLs' and, on a loopback listener, its own port's.
 */
function originList(raw: string | undefined, problems: string[], implied: (string | undefined)[]): string[] {
  const named: string[] = [];
  for (const item of raw?.split(',').map((s) => s.trim()).filter(Boolean) ?? []) {
    const origin = originOf(item, true);
    if (origin === undefined) problems.push(`ALLOWED_ORIGINS must list origins such as https://app.example.com (scheme, host and port only) (got "${item}")`);
    else named.push(origin);
  }
  return [...new Set([...implied.filter((o): o is string => o !== undefined), ...named])];
}

const NO_TIER_CLAIM = 'none';

/**
 * DESIGN §2. An identity provider's JWKS signs tokens for other applications too, so its tokens are
 * accepted only for this issuer and audience, and the keys are fetched over TLS (plain http only on
 * loopback). A tier claim is honoured only where the operator names it: `tier` for the service's own
 * HS256 tokens (npm run token), none for an identity provider's unless AUTH_TIER_CLAIM names one.
 */
function authSettings(str: (name: string) => string | undefined, problems: string[]): Config['auth'] {
  const jwtSecret = str('AUTH_JWT_SECRET');
  if (jwtSecret !== undefined && Buffer.byteLength(jwtSecret) < 32) problems.push('AUTH_JWT_SECRET must be at least 32 bytes');
  const rawJwks = str('AUTH_JWKS_URL');
  let jwksUrl: string | undefined;
  if (rawJwks !== undefined) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(rawJwks);
    } catch {
      problems.push(`AUTH_JWKS_URL must be a URL (got "${rawJwks}")`);
    }
    if (parsed && parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && LOOPBACK_HOSTS.test(parsed.hostname))) {
      problems.push(`AUTH_JWKS_URL must be an https: URL (http: only for a loopback host) (got "${rawJwks}")`);
    } else if (parsed) {
      jwksUrl = rawJwks;
    }
  }
  const issuer = str('AUTH_ISSUER');
  const audience = str('AUTH_AUDIENCE');
  if (rawJwks !== undefined) {
    const missing = [issuer === undefined ? 'AUTH_ISSUER' : undefined, audience === undefined ? 'AUTH_AUDIENCE' : undefined].filter(Boolean);
    if (missing.length > 0) {
      problems.push(`${missing.join(' and ')} must be set with AUTH_JWKS_URL (an identity provider signs tokens for other applications too)`);
    }
  }
  const rawClaim = str('AUTH_TIER_CLAIM');
  if (rawClaim !== undefined && (/\s/.test(rawClaim) || rawClaim.length > 200)) {
    problems.push(`AUTH_TIER_CLAIM must be a claim name (no spaces, at most 200 characters) or "${NO_TIER_CLAIM}" (got "${rawClaim}")`);
  }
  const tierClaim = rawClaim === NO_TIER_CLAIM ? undefined : (rawClaim ?? (rawJwks === undefined ? 'tier' : undefined));
  return { jwtSecret, jwksUrl, issuer, audience, tierClaim };
}

function loadCatalogue(file: string | undefined, packsJson: string | undefined, problems: string[]): Catalogue {
  let catalogue: Catalogue = structuredClone(BUILT_IN_CATALOGUE);
  if (file !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      problems.push(`CONFIG_FILE ${file} could not be read as JSON: ${(err as Error).message}`);
      return catalogue;
    }
    const errors = [...Value.Errors(CatalogueSchema, parsed)];
    if (errors.length > 0) {
      for (const e of errors.slice(0, 10)) problems.push(`CONFIG_FILE ${e.instancePath || '/'}: ${e.message}`);
      return catalogue;
    }
    catalogue = parsed as Catalogue;
  }
  if (packsJson !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(packsJson);
    } catch {
      problems.push('CREDIT_PACKS must be a JSON array of packs');
      return catalogue;
    }
    const errors = [...Value.Errors(CreditPacksSchema, parsed)];
    if (errors.length > 0) {
      for (const e of errors.slice(0, 10)) problems.push(`CREDIT_PACKS ${e.instancePath || '/'}: ${e.message}`);
      return catalogue;
    }
    catalogue = { ...catalogue, creditPacks: parsed as Catalogue['creditPacks'] };
  }
  for (const p of catalogueProblems(catalogue)) problems.push(`catalogue: ${p}`);
  return catalogue;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
