import { createHash } from 'node:crypto';
import { Cluster, Command, Redis, type NatMap } from 'ioredis';
import type { RedisEndpoint } from '../config.ts';
import { AppError } from '../http/errors.ts';

// One Redis connection per instance serves every Redis-backed piece (rate limits, stream leases, frame
// logs); whoever opens it closes it. It is a Redis Cluster client when the endpoint names cluster nodes.

/** One Redis server, or a Redis Cluster (DESIGN §15): every piece works on either. */
export type RedisClient = Redis | Cluster;

/** How long a call waits for a (re)connecting client before answering 503. */
const READY_WAIT_MS = 1000;

const COMMAND_OPTIONS = { maxRetriesPerRequest: 1, commandTimeout: 1000, connectTimeout: 2000 } as const;
/**
 * Commands sent in the same tick go out together, in one write (ioredis auto-pipelining; per node on a
 * cluster): with many turns running, their frame-log writes, admissions and lease calls share writes and
 * Redis's reads instead of one system call each. Order per connection is kept; a command still fails on
 * its own. Measured: docs/PERFORMANCE.md ("Latest change measured").
 */
const AUTO_PIPELINING = { enableAutoPipelining: true } as const;
/**
 * The longest an operation is waited for, whatever the client does meanwhile. A command's own timeout
 * does not bound it on a cluster: a command refused on a node's (re)connecting connection is retried
 * after a slot refresh, up to 16 times, and a refresh of frozen nodes waits slotsRefreshTimeout for
 * each; a pipeline sent again that way has no timer left at all. Twice the command timeout leaves
 * room for one such retry during a real failover.
 */
const OPERATION_BOUND_MS = 2 * COMMAND_OPTIONS.commandTimeout;
const reconnectDelay = (times: number): number => Math.min(times * 100, 1000);

/**
 * A client that fails fast during an outage and heals by itself. Commands are never queued while
 * disconnected (a queued lease or hit replayed minutes later would act on a request long gone);
 * `redisCall` waits briefly for the connection instead. Reconnection never gives up and retries at
 * least every second, so the service recovers about a second after Redis returns. A cluster client
 * does the same for the cluster and for each node. `natMap` maps the addresses cluster nodes announce
 * to where this client reaches them (NAT, a test's proxies).
 */
export function openRedis(endpoint: RedisEndpoint | string, onError: (err: Error) => void = () => undefined, natMap?: NatMap): RedisClient {
  const { url, clusterNodes } = typeof endpoint === 'string' ? { url: endpoint, clusterNodes: undefined } : endpoint;
  let client: RedisClient;
  if (clusterNodes !== undefined) {
    client = new Cluster(
      clusterNodes.map((n) => ({ host: n.host, port: n.port })),
      {
        enableOfflineQueue: false,
        ...AUTO_PIPELINING,
        clusterRetryStrategy: reconnectDelay,
        // Without it a node whose connection dropped is found again only through a MOVED reply.
        clusterNodeRetryStrategy: reconnectDelay,
        slotsRefreshTimeout: COMMAND_OPTIONS.commandTimeout,
        redisOptions: { ...COMMAND_OPTIONS, ...credentialsOf(url) },
        ...(natMap ? { natMap } : {}),
      },
    );
  } else {
    if (url === undefined) throw new Error('a Redis endpoint needs a URL or cluster nodes');
    client = new Redis(url, { enableOfflineQueue: false, ...COMMAND_OPTIONS, ...AUTO_PIPELINING, retryStrategy: reconnectDelay });
  }
  // Without a listener ioredis prints every failed reconnect attempt to stderr.
  client.on('error', onError);
  return client;
}

/** A cluster's nodes take REDIS_URL's user, password and TLS (`rediss:`); its host is not used. */
function credentialsOf(url: string | undefined): { username?: string; password?: string; tls?: object } {
  if (url === undefined) return {};
  const u = new URL(url);
  return {
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/**
 * A second connection like `client`, for subscriber mode: its commands wait while it (re)connects,
 * and it subscribes again after a reconnect. On a cluster, SUBSCRIBE and PUBLISH reach every node
 * (regular pub/sub is cluster-wide), so one subscriber connection hears every instance.
 */
export function subscriberOf(client: RedisClient): RedisClient {
  const override = { enableOfflineQueue: true, lazyConnect: false };
  return client instanceof Cluster ? client.duplicate([], override) : client.duplicate(override);
}

/** DESIGN §15: every key of one user's operations (rate limits, the stream lease) carries this hash tag. */
export const userTag = (userId: string): string => `{u:${userId}}`;

/** DESIGN §15: every key and channel of one turn (its frame log, its notices) carries this hash tag. */
export const turnTag = (turnId: string): string => `{t:${turnId}}`;

const pendingReady = new WeakMap<RedisClient, Promise<void>>();

/** One shared wait per client, so a burst of requests during a reconnect adds one listener, not hundreds. */
function whenReady(client: RedisClient): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  if (client.status === 'end') return Promise.reject(new Error('redis connection closed'));
  let pending = pendingReady.get(client);
  if (!pending) {
    pending = new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        client.off('ready', onReady);
        pendingReady.delete(client);
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const timer = setTimeout(() => done(new Error('redis not ready')), READY_WAIT_MS);
      client.on('ready', onReady);
    });
    pendingReady.set(client, pending);
  }
  return pending;
}

/** How to take back an operation whose caller gave up on it (see undoLater). */
export interface Undo {
  readonly undo: (c: RedisClient) => Promise<unknown>;
  /** How long the operation's effect could last. */
  readonly forMs: number;
}

/**
 * Runs a Redis operation; any failure (down, timeout, closed, no answer within OPERATION_BOUND_MS)
 * becomes a retryable 503. An operation with `undo` sent before it failed is taken back in the
 * background should it run after all.
 */
export async function redisCall<T>(client: RedisClient, op: (c: RedisClient) => Promise<T>, undo?: Undo): Promise<T> {
  await whenReady(client).catch((err: unknown) => {
    throw unavailable(err);
  });
  const running = (async () => op(client))();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${OPERATION_BOUND_MS} ms`)), OPERATION_BOUND_MS);
  });
  try {
    return await Promise.race([running, late]);
  } catch (err) {
    // Taken back once the operation's own fate is known: a command given up on at the bound may still
    // be waiting in the client, to be sent later; an undo sent before it would take back nothing.
    const settled = (): void => {
      if (undo) undoLater(client, undo.undo, undo.forMs);
    };
    running.then(settled, settled);
    throw unavailable(err);
  } finally {
    clearTimeout(timer);
  }
}

function unavailable(cause: unknown): AppError {
  const err = new AppError('SERVICE_UNAVAILABLE', 'A shared service is temporarily unavailable', { headers: { 'Retry-After': '5' } });
  err.cause = cause;
  return err;
}

const UNDO_RETRY_MS = 250;

/**
 * Undoes, in the background, a command whose caller gave up on it (timed out, connection lost): the
 * command may still run when Redis answers again — a frozen Redis runs what it had read when it
 * wakes — so its effect is undone then. The undo goes out on the same connection after the command
 * (Redis runs one connection's commands in order) and is retried through reconnections until it has
 * run or `forMs` has passed (after which the effect has expired on its own). It must be idempotent and
 * touch only what the command made (a token, a member).
 */
function undoLater(client: RedisClient, undo: (c: RedisClient) => Promise<unknown>, forMs: number): void {
  const giveUpAt = Date.now() + forMs;
  const attempt = (): void => {
    if (client.status === 'end') return;
    undo(client).catch(() => {
      if (Date.now() + UNDO_RETRY_MS < giveUpAt) setTimeout(attempt, UNDO_RETRY_MS).unref();
    });
  };
  attempt();
}

/** A Lua script run by SHA, loaded on first use or after a Redis restart (NOSCRIPT). */
export class LuaScript {
  readonly #source: string;
  readonly #sha: string;

  constructor(source: string) {
    this.#source = source;
    this.#sha = createHash('sha1').update(source).digest('hex');
  }

  /**
   * `now`: written to the connection at once rather than with the commands of the tick (auto-pipelining
   * sends those once the tick's work is done), for a call whose answer is awaited only after CPU work it
   * should overlap — a turn's admission, asked before its body is read and its statement built. Only
   * when no command waits in the client's queue: one asked earlier (a lease given back) goes first, so
   * the connection keeps its order.
   */
  async run(client: RedisClient, keys: string[], args: (string | number)[], opts: { now?: boolean } = {}): Promise<unknown> {
    try {
      if (opts.now && client.autoPipelineQueueSize === 0) {
        const command = new Command('evalsha', [this.#sha, keys.length, ...keys, ...args], { replyEncoding: 'utf8' });
        void client.sendCommand(command);
        return await command.promise;
      }
      return await client.evalsha(this.#sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.eval(this.#source, keys.length, ...keys, ...args);
    }
  }
}

/** QUIT when connected; otherwise just stop reconnecting. */
export async function closeRedis(client: RedisClient): Promise<void> {
  if (client.status === 'ready') {
    await client.quit().catch(() => client.disconnect());
  } else {
    client.disconnect();
  }
}
