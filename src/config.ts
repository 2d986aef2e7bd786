import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { Value } from 'typebox/value';
import { BUILT_IN_CATALOGUE, CatalogueSchema, CreditPacksSchema, PROVIDERS, catalogueProblems, type Catalogue, type Provider } from './catalogue.ts';
import { parseKeyring } from './platform/aes-vault.ts';
import { LIVENESS_BEATS, liveWindowMs } from './platform/liveness.ts';
import { defaultMaxOpenStreams, descriptorLimit } from './platform/descriptors.ts';

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

/** A Redis Cluster node's address (DESIGN §15). */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/**
 * Where the shared Redis is: one server (`url`), or a Redis Cluster reached through its seed nodes
 * (`clusterNodes`), whose every node then takes the credentials and TLS (`rediss:`) of `url` when set.
 */
export interface RedisEndpoint {
  readonly url: string | undefined;
  readonly clusterNodes: readonly RedisNode[] | undefined;
}

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /**
   * DESIGN §15: PostgreSQL itself, past any transaction pooler, for the two connections that need a
   * session of their own: the frame store's LISTEN and the migrations' (a session lock). DATABASE_URL by default.
   */
  readonly databaseListenUrl: string | undefined;
  /** DESIGN §15: false behind a transaction-mode pooler — unnamed statements, no session startup parameters. */
  readonly databasePreparedStatements: boolean;
  /** With prepared statements off: hot statements called through functions of the database (db/function-cache.ts). */
  readonly databaseStatementFunctions: boolean;
  /** Unset: no shared Redis. */
  readonly redis: RedisEndpoint | undefined;
  /** DESIGN §15: the proxies whose X-Forwarded-For / -Proto are believed (addresses, CIDR ranges); false = none. */
  readonly trustProxy: false | readonly string[];
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
  /**
   * DESIGN §16: stream connections (starts and attaches; a start's until its turn has ended too) this instance holds at once; one more is refused
   * `503` with `Retry-After`. Default from RLIMIT_NOFILE (platform/descriptors.ts).
   */
  readonly maxOpenStreams: number;
  /** DESIGN §16: OTLP over HTTP collector (spans to `<it>/v1/traces`); unset = no tracing. */
  readonly otelEndpoint: string | undefined;
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

/** Reads settings from the environment; every problem is kept, named by its variable. */
class EnvReader {
  readonly problems: string[] = [];
  readonly #env: Env;

  constructor(env: Env) {
    this.#env = env;
  }

  /** A trimmed value; undefined when unset or blank. */
  str(name: string): string | undefined {
    const v = this.#env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  }

  int(name: string, def: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const raw = this.str(name);
    if (raw === undefined) return def;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      this.problems.push(`${name} must be an integer between ${min} and ${max} (got "${raw}")`);
      return def;
    }
    return n;
  }

  /** An http(s), postgres or redis URL without trailing slashes. */
  url(name: string, def: string): string;
  url(name: string, def: string | undefined): string | undefined;
  url(name: string, def: string | undefined): string | undefined {
    const raw = this.str(name);
    if (raw === undefined) return def;
    try {
      const u = new URL(raw);
      if (!/^(https?|postgres(ql)?|rediss?):$/.test(u.protocol)) throw new Error('protocol');
      return raw.replace(/\/+$/, '');
    } catch {
      this.problems.push(`${name} must be a URL (got "${raw}")`);
      return def;
    }
  }

  bool(name: string, def: boolean): boolean {
    const raw = this.str(name);
    if (raw === undefined) return def;
    if (/^(true|1|yes|on)$/i.test(raw)) return true;
    if (/^(false|0|no|off)$/i.test(raw)) return false;
    this.problems.push(`${name} must be true or false (got "${raw}")`);
    return def;
  }

  oneOf<T extends string>(name: string, choices: readonly T[], def: T): T {
    const raw = this.str(name) ?? def;
    if ((choices as readonly string[]).includes(raw)) return raw as T;
    this.problems.push(`${name} must be one of ${choices.join(', ')} (got "${raw}")`);
    return def;
  }
}

type NumericSetting = { readonly [K in keyof Config]: Config[K] extends number ? K : never }[keyof Config];

/** The numeric settings that stand alone: variable, default, least and greatest value. */
const NUMERIC_SETTINGS: Readonly<Partial<Record<NumericSetting, readonly [name: string, def: number, min: number, max?: number]>>> = {
  databasePoolSize: ['DATABASE_POOL_SIZE', 20, 1, 10_000],
  databasePoolIdleMs: ['DATABASE_POOL_IDLE_MS', 300_000, 0, 24 * 3_600_000],
  databaseConnectTimeoutMs: ['DATABASE_CONNECT_TIMEOUT_MS', 5000, 100, 600_000],
  databaseStatementTimeoutMs: ['DATABASE_STATEMENT_TIMEOUT_MS', 10_000, 100, 3_600_000],
  providerProbeTimeoutMs: ['PROVIDER_PROBE_TIMEOUT_MS', 5000, 1, 120_000],
  marketDataProbeTimeoutMs: ['MARKET_DATA_PROBE_TIMEOUT_MS', 5000, 1, 120_000],
  streamHeartbeatMs: ['STREAM_HEARTBEAT_MS', 15_000, 10, 3_600_000],
  streamIdleTimeoutMs: ['STREAM_IDLE_TIMEOUT_MS', 60_000, 10, 3_600_000],
  streamStallTimeoutMs: ['STREAM_STALL_TIMEOUT_MS', 60_000, 10, 3_600_000],
  streamMaxDurationMs: ['STREAM_MAX_DURATION_MS', 900_000, 100, 24 * 3_600_000],
  streamDetachGraceMs: ['STREAM_DETACH_GRACE_MS', 30_000, 0, 3_600_000],
  streamLogRetentionMs: ['STREAM_LOG_RETENTION_MS', 600_000, 1000, 7 * 24 * 3_600_000],
  streamLogMaxBytes: ['STREAM_LOG_MAX_BYTES', 4 * 1024 * 1024, 1024, 256 * 1024 * 1024],
  shutdownDrainMs: ['SHUTDOWN_DRAIN_MS', 25_000, 0, 3_600_000],
  maxImageBytes: ['MAX_IMAGE_BYTES', 3 * 1024 * 1024, 1, 3_375_000],
  requestTimeoutMs: ['REQUEST_TIMEOUT_MS', 60_000, 100, 3_600_000],
  contextBudgetChars: ['CONTEXT_BUDGET_CHARS', 60_000, 1000],
  advisorMaxToolCalls: ['ADVISOR_MAX_TOOL_CALLS', 8, 0, 64],
  marketDataTimeoutMs: ['MARKET_DATA_TIMEOUT_MS', 10_000, 10, 120_000],
  reservationSweepAfterMs: ['RESERVATION_SWEEP_AFTER_MS', 10 * 60_000, 1000, 7 * 24 * 3_600_000],
  reservationSweepIntervalMs: ['RESERVATION_SWEEP_INTERVAL_MS', 30_000, 100, 3_600_000],
};

function numericSettings(r: EnvReader): Record<NumericSetting, number> {
  const out: Partial<Record<NumericSetting, number>> = {};
  for (const [key, [name, def, min, max]] of Object.entries(NUMERIC_SETTINGS) as [NumericSetting, readonly [string, number, number, number?]][]) {
    out[key] = r.int(name, def, min, max);
  }
  return out as Record<NumericSetting, number>;
}

/** Loads and validates configuration once; every problem is reported, named by its variable. */
export function loadConfig(env: Env = process.env): Config {
  const r = new EnvReader(env);
  const numbers = numericSettings(r);
  const port = r.int('PORT', 3000, 0, 65535);
  const host = r.str('HOST') ?? '127.0.0.1';
  const databaseUrl = r.url('DATABASE_URL', undefined);
  if (r.str('DATABASE_URL') !== undefined) sharedSecretProblems(r);
  const auth = authSettings(r);
  const loopback = LOOPBACK_HOSTS.test(host) || host === '::1';
  const checkout = checkoutUrls(r, host, loopback, port);
  const allowedOrigins = originList(r.str('ALLOWED_ORIGINS'), r.problems, [
    originOf(checkout.checkoutSuccessUrl),
    originOf(checkout.checkoutCancelUrl),
    // The names a browser on this machine may use for a loopback listener, all one server.
    ...(loopback ? ['localhost', '127.0.0.1', '[::1]'].map((h) => `http://${h}:${port}`) : []),
  ]);
  const config: Config = {
    ...numbers,
    otelEndpoint: r.url('OTEL_EXPORTER_OTLP_ENDPOINT', undefined),
    maxOpenStreams: r.int('MAX_OPEN_STREAMS', defaultMaxOpenStreams(descriptorLimit(), numbers.databasePoolSize), 1, 10_000_000),
    port,
    host,
    dataDir: path.resolve(r.str('DATA_DIR') ?? './data'),
    databaseUrl,
    databaseListenUrl: r.url('DATABASE_LISTEN_URL', databaseUrl),
    databasePreparedStatements: r.bool('DATABASE_PREPARED_STATEMENTS', true),
    databaseStatementFunctions: r.bool('DATABASE_STATEMENT_FUNCTIONS', true),
    redis: redisEndpoint(r.url('REDIS_URL', undefined), r.str('REDIS_CLUSTER_NODES'), r.problems),
    trustProxy: trustedProxies(r.str('TRUST_PROXY'), r.problems),
    encryptionKeys: r.str('ENCRYPTION_KEYS'),
    auth,
    providerBaseUrls: Object.fromEntries(PROVIDERS.map((p) => [p, r.url(`${p.toUpperCase()}_BASE_URL`, PROVIDER_PUBLIC_BASE_URLS[p])])) as Record<
      Provider,
      string
    >,
    marketData: marketDataSettings(r),
    stripe: stripeSettings(r),
    localSignIn: loopback && databaseUrl === undefined && auth.jwtSecret === undefined && auth.jwksUrl === undefined,
    ...checkout,
    allowedOrigins,
    catalogue: loadCatalogue(r.str('CONFIG_FILE'), r.str('CREDIT_PACKS'), r.problems),
    logLevel: r.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    metricsToken: metricsToken(r),
    maxBodyBytes: maxBodyBytes(r),
  };
  // A running turn shows it is alive every STREAM_HEARTBEAT_MS; the sweeper must wait for several missed ones.
  if (config.reservationSweepAfterMs < liveWindowMs(config.streamHeartbeatMs)) {
    r.problems.push(
      `RESERVATION_SWEEP_AFTER_MS (${config.reservationSweepAfterMs}) must be at least ` +
        `${LIVENESS_BEATS} × STREAM_HEARTBEAT_MS (${config.streamHeartbeatMs}): ` +
        'a running turn shows it is alive at each heartbeat, and one without a sign of life that long is taken for crashed',
    );
  }
  if (config.encryptionKeys !== undefined) {
    // Read here, so that a malformed keyring is refused with the rest, before any database is opened.
    try {
      parseKeyring(config.encryptionKeys);
    } catch (err) {
      r.problems.push((err as Error).message);
    }
  }
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return deepFreeze(config);
}

function marketDataSettings(r: EnvReader): Config['marketData'] {
  const provider = r.oneOf('MARKET_DATA_PROVIDER', MARKET_DATA_PROVIDERS, 'polygon');
  return { provider, baseUrl: r.url('MARKET_DATA_BASE_URL', MARKET_DATA_PUBLIC_BASE_URLS[provider]) };
}

function stripeSettings(r: EnvReader): Config['stripe'] {
  const secretKey = r.str('STRIPE_SECRET_KEY');
  const webhookSecret = r.str('STRIPE_WEBHOOK_SECRET');
  // DESIGN §10: a service that sells packs but cannot verify the webhook that grants them loses every credit.
  if (secretKey !== undefined && webhookSecret === undefined) {
    r.problems.push('STRIPE_WEBHOOK_SECRET must be set with STRIPE_SECRET_KEY (without it no purchase could ever be credited)');
  }
  return { secretKey, webhookSecret, apiBase: r.url('STRIPE_API_BASE', undefined) };
}

/** The checkout returns to the web client this process serves, unless the operator names a front end. */
function checkoutUrls(r: EnvReader, host: string, loopback: boolean, port: number): Pick<Config, 'checkoutSuccessUrl' | 'checkoutCancelUrl'> {
  const name = loopback || host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  const selfOrigin = `http://${name}:${port}`;
  return {
    checkoutSuccessUrl: r.url('CHECKOUT_SUCCESS_URL', `${selfOrigin}/billing/success?session_id={CHECKOUT_SESSION_ID}`),
    checkoutCancelUrl: r.url('CHECKOUT_CANCEL_URL', `${selfOrigin}/billing/cancel`),
  };
}

function metricsToken(r: EnvReader): string | undefined {
  const token = r.str('METRICS_TOKEN');
  if (token !== undefined && !/^[\x21-\x7e]{16,512}$/.test(token)) {
    r.problems.push('METRICS_TOKEN must be 16 to 512 printable ASCII characters without spaces');
  }
  return token;
}

function maxBodyBytes(r: EnvReader): number {
  const bytes = r.int('MAX_BODY_BYTES', 20 * 1024 * 1024, 1);
  if (bytes < BODY_CAP_FLOOR) r.problems.push(`MAX_BODY_BYTES must be at least ${BODY_CAP_FLOOR} (4 maximal images and 50,000 characters)`);
  return bytes;
}

/**
 * DESIGN §10: instances on one database must share the keyring and the token secret. A secret
 * generated per instance into its own DATA_DIR would make each refuse the others' tokens and unable to
 * read the keys they stored, so on PostgreSQL none is generated.
 */
function sharedSecretProblems(r: EnvReader): void {
  const { problems } = r;
  const str = (name: string): string | undefined => r.str(name);
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

/** DESIGN §15: REDIS_CLUSTER_NODES (`host:port,…`) selects cluster mode; REDIS_URL then gives credentials and TLS. */
function redisEndpoint(url: string | undefined, nodesSpec: string | undefined, problems: string[]): RedisEndpoint | undefined {
  if (nodesSpec === undefined) return url === undefined ? undefined : { url, clusterNodes: undefined };
  const clusterNodes: RedisNode[] = [];
  for (const entry of nodesSpec.split(',').map((e) => e.trim())) {
    const match = /^(\[[0-9a-f:.]+\]|[^\s:[\]]+):(\d{1,5})$/i.exec(entry);
    const port = Number(match?.[2]);
    if (!match?.[1] || !Number.isInteger(port) || port < 1 || port > 65535) {
      problems.push(`REDIS_CLUSTER_NODES must be comma-separated host:port entries (got "${entry}")`);
      continue;
    }
    clusterNodes.push({ host: match[1].replace(/^\[|\]$/g, ''), port });
  }
  return { url, clusterNodes };
}

/**
 * TRUST_PROXY: which peers may say, in X-Forwarded-For and X-Forwarded-Proto, whom they relay —
 * comma-separated addresses or CIDR ranges of the proxies (or proxy-addr's names `loopback`,
 * `linklocal`, `uniquelocal`). Unset or `false`: nobody; the socket's peer is the client. `true`
 * (believe any peer) and a hop count are refused: with either, a client that connects directly names
 * any address it likes.
 */
function trustedProxies(raw: string | undefined, problems: string[]): false | readonly string[] {
  if (raw === undefined || /^(false|no|off)$/i.test(raw)) return false;
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.some((e) => !PROXY_NAMES.has(e) && !isAddressOrRange(e))) {
    problems.push(`TRUST_PROXY must be the proxies' addresses or CIDR ranges, comma-separated (or loopback, linklocal, uniquelocal), or false (got "${raw}")`);
    return false;
  }
  return entries;
}

const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function isAddressOrRange(entry: string): boolean {
  const [address = '', bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d{1,3}$/.test(bits) && n <= (family === 4 ? 32 : 128);
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
  for (const item of raw
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean) ?? []) {
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
function authSettings(r: EnvReader): Config['auth'] {
  const { problems } = r;
  const str = (name: string): string | undefined => r.str(name);
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
