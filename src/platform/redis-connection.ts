import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { AppError } from '../http/errors.ts';

// One Redis connection per instance serves every Redis-backed piece (rate limits, stream leases);
// whoever opens it closes it.

/** How long a call waits for a (re)connecting client before answering 503. */
const READY_WAIT_MS = 1000;

/**
 * A client that fails fast during an outage and heals by itself. Commands are never queued while
 * disconnected (a queued lease or hit replayed minutes later would act on a request long gone);
 * `redisCall` waits briefly for the connection instead. Reconnection never gives up and retries at
 * least every second, so the service recovers about a second after Redis returns.
 */
export function openRedis(url: string, onError: (err: Error) => void = () => undefined): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 1000,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
  // Without a listener ioredis prints every failed reconnect attempt to stderr.
  client.on('error', onError);
  return client;
}

const pendingReady = new WeakMap<Redis, Promise<void>>();

/** One shared wait per client, so a burst of requests during a reconnect adds one listener, not hundreds. */
function whenReady(client: Redis): Promise<void> {
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
  readonly undo: (c: Redis) => Promise<unknown>;
  /** How long the operation's effect could last. */
  readonly forMs: number;
}

/**
 * Runs a Redis operation; any failure (down, timeout, closed) becomes a retryable 503. An operation
 * with `undo` sent before it failed is taken back in the background should it run after all.
 */
export async function redisCall<T>(client: Redis, op: (c: Redis) => Promise<T>, undo?: Undo): Promise<T> {
  await whenReady(client).catch((err: unknown) => {
    throw unavailable(err);
  });
  try {
    return await op(client);
  } catch (err) {
    if (undo) undoLater(client, undo.undo, undo.forMs);
    throw unavailable(err);
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
function undoLater(client: Redis, undo: (c: Redis) => Promise<unknown>, forMs: number): void {
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

  async run(client: Redis, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await client.evalsha(this.#sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return client.eval(this.#source, keys.length, ...keys, ...args);
    }
  }
}

/** QUIT when connected; otherwise just stop reconnecting. */
export async function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'ready') {
    await client.quit().catch(() => client.disconnect());
  } else {
    client.disconnect();
  }
}
