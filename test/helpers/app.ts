import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { buildApp, type App } from '../../src/app.ts';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { createDeps, type Deps, type DepsOverrides } from '../../src/deps.ts';
import { mintToken } from '../../src/http/auth.ts';
import { createLogger } from '../../src/logger.ts';
import type { Clock } from '../../src/platform/clock.ts';
import { ensureDatabase } from './database.ts';
import { pgliteTemplate } from './pglite-template.ts';

export const TEST_JWT_SECRET = 'test-secret-0123456789abcdef0123456789abcdef';
export const TEST_ENCRYPTION_KEYS = `test1:${Buffer.alloc(32, 7).toString('base64')}`;

/** Which stores this run uses: embedded by default, real PostgreSQL/Redis when their URLs are set. */
export const STORES = {
  databaseUrl: process.env.DATABASE_URL,
  redisUrl: process.env.REDIS_URL,
};

export interface TestApp {
  readonly app: App;
  readonly deps: Deps;
  /** Every log line the app wrote. */
  readonly logs: string[];
  token(userId: string, opts?: { tier?: string; ttlSeconds?: number }): Promise<string>;
  /** `app.inject` as `userId` (or anonymous with user null). */
  call(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    url: string,
    opts?: { user?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ statusCode: number; headers: Record<string, unknown>; body: string; json<T = Record<string, unknown>>(): T }>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string | undefined>;
  clock?: Clock;
  /** Share another test app's database schema and Redis prefix (a second instance). */
  shareWith?: TestApp;
  /** Wrap or replace outside systems and seams (each override gets the real one). */
  deps?: DepsOverrides;
  /** Where the app's spans go (DESIGN §16 tracing on, without a collector). */
  spanExporter?: SpanExporter;
}

const schemaOf = new WeakMap<TestApp, { schema: string; redisPrefix: string; dataDir: string }>();

/** The suites' own database (`STORES.databaseUrl`), created on first use when the server has none of that name. */
let suiteDatabase: Promise<void> | undefined;

export async function buildTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const shared = opts.shareWith ? schemaOf.get(opts.shareWith) : undefined;
  const schema = shared?.schema ?? `t_${randomBytes(6).toString('hex')}`;
  const redisPrefix = shared?.redisPrefix ?? `test:${randomBytes(6).toString('hex')}:`;
  const dataDir = shared?.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'advisor-test-'));
  const config = loadConfig({
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    ENCRYPTION_KEYS: TEST_ENCRYPTION_KEYS,
    DATA_DIR: dataDir,
    DATABASE_URL: STORES.databaseUrl,
    REDIS_URL: STORES.redisUrl,
    LOG_LEVEL: 'info',
    ...opts.env,
  });
  // Only the suite's own URL: a test that points DATABASE_URL elsewhere (an unreachable server) means it.
  if (STORES.databaseUrl !== undefined && config.databaseUrl === STORES.databaseUrl) await (suiteDatabase ??= ensureDatabase(STORES.databaseUrl));
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const embeddedOwner = opts.shareWith && !config.databaseUrl ? opts.shareWith.deps : undefined;
  const deps = await createDeps(config, {
    ...(embeddedOwner ? { shareEmbeddedWith: embeddedOwner } : {}),
    logger: createLogger(config.logLevel, sink),
    pgliteDir: 'memory://',
    ...(!config.databaseUrl && !embeddedOwner ? { pgliteStart: await pgliteTemplate() } : {}),
    ...(config.databaseUrl ? { dbSchema: schema } : {}),
    redisPrefix,
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.deps ? { overrides: opts.deps } : {}),
    ...(opts.spanExporter ? { spanExporter: opts.spanExporter } : {}),
  });
  const app = await buildApp(deps);
  await app.ready();
  const clock = opts.clock;
  const testApp: TestApp = {
    app,
    deps,
    logs,
    token: (userId, o = {}) => mintToken(TEST_JWT_SECRET, userId, { ...o, ...(clock ? { now: clock.now() } : {}) }),
    async call(method, url, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      if (o.user) headers['authorization'] = `Bearer ${await testApp.token(o.user)}`;
      const res = await app.inject({
        method,
        url,
        headers,
        ...(o.body !== undefined ? { payload: typeof o.body === 'string' ? o.body : JSON.stringify(o.body) } : {}),
        ...(o.body !== undefined && typeof o.body !== 'string' ? { headers: { ...headers, 'content-type': 'application/json' } } : {}),
      });
      return {
        statusCode: res.statusCode,
        headers: res.headers,
        body: res.body,
        json: <T>() => JSON.parse(res.body) as T,
      };
    },
    async close() {
      await app.close();
      await deps.close();
      if (!shared) {
        rmSync(dataDir, { recursive: true, force: true });
        if (config.databaseUrl) await dropSchema(config.databaseUrl, schema);
      }
    },
  };
  schemaOf.set(testApp, { schema, redisPrefix, dataDir });
  return testApp;
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}

/** Error envelope code of a response. */
export function codeOf(res: { json<T>(): T }): string | undefined {
  return res.json<{ error?: { code?: string } }>().error?.code;
}

/** The problems `loadConfig` reports for `env` (none: it loads). */
export function configProblems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}
