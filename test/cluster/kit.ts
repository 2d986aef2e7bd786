// Shared by the multi-instance and fault tests: reading responses of real server processes, granting
// credits the operator's way, and the money checks of DESIGN §8 straight from the shared database.
import assert from 'node:assert/strict';
import { after, before, beforeEach } from 'node:test';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseFrames, type Frame, type LiveStream } from '../kits/conversations.ts';
import { TEST_ENCRYPTION_KEYS, TEST_JWT_SECRET } from '../helpers/app.ts';
import { startOpenAiCompatibleFake, startStripeFake, type OpenAiCompatibleFake, type StripeFake } from '../fakes/index.ts';
import { CLUSTER_STORES, startCluster, type Cluster } from './cluster.ts';

const root = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);

/**
 * These suites need a real PostgreSQL (DATABASE_URL) and redis-server, asked for with REDIS_URL (or
 * REDIS_CLUSTER_NODES, for a Redis Cluster); without them they are not registered.
 */
export const CLUSTER_AVAILABLE = Boolean(CLUSTER_STORES.databaseUrl && (CLUSTER_STORES.redisUrl || CLUSTER_STORES.redisCluster));

/** An instance's settings for no Redis at all (PostgreSQL holds its limits, leases and frame logs). */
export const WITHOUT_REDIS = { REDIS_URL: '', REDIS_CLUSTER_NODES: '' } as const;

export interface Outcome {
  status: number;
  /** Error envelope code of a non-2xx JSON answer. */
  code: string | undefined;
  headers: Headers;
  /** Frames of a text/event-stream answer (read to its end). */
  frames: Frame[];
  json: unknown;
}

/** Reads a whole response: SSE frames, or the JSON body and its error code. */
export async function outcome(res: Response): Promise<Outcome> {
  const text = await res.text();
  const sse = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  const json: unknown = sse || text === '' ? undefined : JSON.parse(text);
  const code = (json as { error?: { code?: string } } | undefined)?.error?.code;
  return { status: res.status, code, headers: res.headers, frames: sse ? parseFrames(text).frames : [], json };
}

/** `status CODE` (or just the status) of each outcome, counted: the shape every concurrency assertion compares. */
export function tally(outcomes: readonly Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) {
    const key = o.code === undefined ? String(o.status) : `${o.status} ${o.code}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

export const streamPath = (conversationId: string | null = null): string => `/api/advisor/conversations/${conversationId ?? 'new'}/messages/stream`;
export const message = (text = 'How did my last trade go?'): { text: string; clientMessageId: string } => ({ text, clientMessageId: randomUUID() });
export const newUser = (tag: string): string => `${tag}-${randomUUID()}`;
export const lastFrame = (o: Outcome): Frame | undefined => o.frames.at(-1);

/** Saves the user's provider key through an instance (one of the 10 hourly saves) and asserts it was verified. */
export async function saveKey(cluster: Cluster, user: string, apiKey: string, defaultModel?: string): Promise<void> {
  const res = await outcome(await cluster.call(user, 'PUT', '/api/advisor/provider-keys/openai', { apiKey, ...(defaultModel ? { defaultModel } : {}) }));
  assert.equal(res.status, 200, JSON.stringify(res.json));
  assert.equal((res.json as { verified: boolean }).verified, true);
}

/** `npm run admin -- grant <user> <credits> --reason …` against the cluster's database, as an operator runs it. */
export async function grantCredits(cluster: Cluster, user: string, credits: number): Promise<void> {
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: cluster.databaseUrl,
    DATA_DIR: os.tmpdir(),
    ENCRYPTION_KEYS: TEST_ENCRYPTION_KEYS,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    LOG_LEVEL: 'warn',
  };
  const { stdout } = await run(process.execPath, ['scripts/admin.ts', 'grant', user, String(credits), '--reason', 'cluster test'], { cwd: root, env });
  assert.match(stdout, new RegExp(`granted ${credits} credits`));
}

/** DESIGN §8 for every wallet in the database: cached balance = ledger sum. Returns the wallets that break it. */
export async function walletsOffLedger(cluster: Cluster): Promise<{ user_id: string; balance: number; sum: number }[]> {
  return cluster.sql(
    `select w.user_id, w.balance::int as balance, coalesce(l.sum, 0)::int as sum
       from wallets w left join (select user_id, sum(amount) as sum from ledger_entries group by user_id) l using (user_id)
      where w.balance <> coalesce(l.sum, 0)`,
  );
}

export interface Money {
  balance: number;
  ledgerSum: number;
  /** Credits shown by GET /api/billing/wallet (through an instance). */
  apiCredits: number;
  turnCharges: Record<string, number>;
}

export async function money(cluster: Cluster, user: string): Promise<Money> {
  const [wallet] = await cluster.sql<{ balance: number }>('select balance::int as balance from wallets where user_id = $1', [user]);
  const [ledger] = await cluster.sql<{ sum: number }>('select coalesce(sum(amount), 0)::int as sum from ledger_entries where user_id = $1', [user]);
  const charges = await cluster.sql<{ status: string; n: number }>('select status, count(*)::int as n from turn_charges where user_id = $1 group by status', [
    user,
  ]);
  const api = await outcome(await cluster.call(user, 'GET', '/api/billing/wallet'));
  assert.equal(api.status, 200);
  return {
    balance: wallet?.balance ?? 0,
    ledgerSum: ledger?.sum ?? 0,
    apiCredits: (api.json as { credits: number }).credits,
    turnCharges: Object.fromEntries(charges.map((c) => [c.status, c.n])),
  };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The frames of a stream once it has ended; fails instead of hanging past `timeoutMs`. */
export async function framesAtEnd(s: LiveStream, timeoutMs: number): Promise<Frame[]> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('the stream hung')), timeoutMs)));
  try {
    await Promise.race([s.ended, late]);
  } finally {
    clearTimeout(timer);
  }
  return s.frames;
}

/** Indices of the instances still running. */
export function liveInstances(cluster: Cluster): number[] {
  return cluster.instances.flatMap((x, i) => (x.child.exitCode === null && x.child.signalCode === null ? [i] : []));
}

/** An instance that died on its own is a failure of the service: print its last words (crash traces, not log lines). */
export function reportDeadInstances(cluster: Cluster | undefined): void {
  for (const [i, instance] of (cluster?.instances ?? []).entries()) {
    if (instance.child.exitCode === null) continue;
    const lastWords = instance
      .output()
      .split('\n')
      .filter((line) => !line.startsWith('{"level"'));
    process.stderr.write(`instance ${i} exited ${instance.child.exitCode}:\n${lastWords.join('\n').slice(-4000)}\n`);
  }
}

/** The built-in catalogue prices gpt-4.1 at 5 credits a turn and keeps it out of the allowance. */
export const PAID_MODEL = 'gpt-4.1';
export const PAID_TURN_CREDITS = 5;

export interface ClusterWithFakes {
  readonly fake: OpenAiCompatibleFake;
  readonly stripe: StripeFake;
  /** The started cluster (throws when it did not start). */
  cluster(): Cluster;
  close(): Promise<void>;
}

/**
 * Registers before/after hooks that start `instances` server processes (three by default) wired to an
 * OpenAI fake and a Stripe fake (plus `env`), and stop everything afterwards, reporting any instance
 * that died on its own.
 */
export function clusterWithFakes(env: Record<string, string>, instances = 3): ClusterWithFakes {
  let fake: OpenAiCompatibleFake | undefined;
  let stripe: StripeFake | undefined;
  let cluster: Cluster | undefined;
  const started = <T>(x: T | undefined, what: string): T => {
    if (x === undefined) throw new Error(`the ${what} did not start`);
    return x;
  };
  const handle: ClusterWithFakes = {
    get fake() {
      return started(fake, 'provider fake');
    },
    get stripe() {
      return started(stripe, 'Stripe fake');
    },
    cluster: () => started(cluster, 'cluster'),
    async close() {
      reportDeadInstances(cluster);
      await cluster?.close();
      await Promise.all([fake?.close(), stripe?.close()]);
    },
  };
  before(async () => {
    fake = await startOpenAiCompatibleFake({ flavor: 'openai', models: ['gpt-4o-mini', 'gpt-4.1-mini', 'gpt-4o', PAID_MODEL] });
    stripe = await startStripeFake();
    cluster = await startCluster({
      instances,
      env: { OPENAI_BASE_URL: fake.url, STRIPE_SECRET_KEY: stripe.validKey, STRIPE_API_BASE: stripe.url, ...env },
    });
  });
  after(() => handle.close());
  // Each test plays its own provider scripts: one a failed test left queued (its request never reached
  // the provider, e.g. refused 503 on a loaded machine) would otherwise answer the next test's request.
  beforeEach(() => {
    const dropped = fake?.clearQueue() ?? 0;
    if (dropped > 0) process.stdout.write(`# ${dropped} provider script(s) a previous test left queued were dropped\n`);
  });
  return handle;
}
