import type { FastifyBaseLogger } from 'fastify';
import type { PricingConfig, Provider } from '../../catalogue.ts';
import type { Deps } from '../../deps.ts';
import type { TurnLog } from '../../platform/turn-log.ts';
import type { ChatEvent, ChatMessage, RoundUsage, ToolSpec } from '../../providers/llm/index.ts';
import { receiptOf, type Receipt } from '../usage/receipt.ts';
import { errorData, snapshotData, startData } from './frames.ts';
import { apiParts, PartsLog } from './parts.ts';
import type { Toolbox } from '../advisor-tools/toolbox.ts';
import { markProviderKeyRejected, type UsableProviderKey } from '../advisor-keys/service.ts';
import type { TurnCharge } from '../billing/turn-billing.ts';
import type { TurnIds } from './frames.ts';
import * as repo from './repo.ts';
import * as statements from './turn-statements.ts';
import { LEASE_TTL_MS, type Ticking } from './stream-runtime.ts';

/**
 * Generous for an advisor answer; every protocol gets it in its own field (Anthropic requires one).
 * Exported for bench/lib/turn-floor.ts, whose floor sends the service's own request.
 */
export const MAX_OUTPUT_TOKENS = 8192;
/**
 * Why a turn ended before its answer did: no client came back within the detach grace (DESIGN §12),
 * a stop was asked for, the service is draining, it ran past STREAM_MAX_DURATION_MS, or another
 * stream of its user holds the lease now.
 */
export type StopCause = 'client' | 'stopped' | 'shutdown' | 'deadline' | 'superseded';

const STOP_REASONS: Readonly<Record<StopCause, string>> = {
  client: 'no client attached',
  stopped: 'a stop was asked for',
  shutdown: 'service is shutting down',
  deadline: 'the turn ran past STREAM_MAX_DURATION_MS',
  superseded: 'another stream of the user holds the lease',
};

/** What one provider round is sent besides the turn's provider, model and key. */
export interface RoundRequest {
  readonly system: string | undefined;
  readonly messages: readonly ChatMessage[];
  /** The tools offered (none: left out of the request). */
  readonly tools: readonly ToolSpec[];
  /** `none` once the turn's tool calls are spent: the model must answer in text. */
  readonly toolChoice?: 'auto' | 'none';
}

interface LiveTurnInit extends TurnIds {
  readonly provider: Provider;
  readonly userId: string;
  readonly leaseToken: string;
  /** The user's message of this turn: a source of its reply's figures (DESIGN §18). */
  readonly userText: string;
  readonly key: UsableProviderKey;
  readonly charge: TurnCharge;
  readonly toolbox: Toolbox;
  /** The model's catalogue prices (DESIGN §13), found when the turn was decided. */
  readonly pricing: PricingConfig | undefined;
  readonly log: FastifyBaseLogger;
}

/**
 * A turn from its reservation to its settlement. It owns what the turn holds — the user's stream
 * lease (renewed while it runs), the charge, the user's key, its frame log and what the reply holds
 * so far, its place in the heartbeat ticker and in the shutdown drain — and gives each back exactly
 * once. The provider round is a step it can repeat (`round`); `stop` aborts whatever round runs, the
 * first cause winning. It runs whether or not a client is attached, for the detach grace.
 */
export class LiveTurn implements TurnIds, Ticking {
  readonly conversationId: string;
  readonly userMessageId: string;
  readonly assistantMessageId: string;
  readonly provider: Provider;
  readonly model: string;
  readonly billing: TurnIds['billing'];
  readonly userId: string;
  /** The user's message of this turn: a source of its reply's figures (DESIGN §18). */
  readonly userText: string;
  readonly charge: TurnCharge;
  /** Runs the turn's tool calls. */
  readonly toolbox: Toolbox;
  readonly pricing: PricingConfig | undefined;
  readonly log: FastifyBaseLogger;
  /** The reply's text, tool calls and results so far. */
  readonly parts = new PartsLog();
  /** The latest usage figures of each round, kept as they arrive (a round that fails keeps what it counted). */
  readonly #usage: RoundUsage[] = [];
  readonly #deps: Deps;
  readonly #leaseToken: string;
  readonly #key: UsableProviderKey;
  readonly #abort = new AbortController();
  #frames: TurnLog | undefined;
  #cause: StopCause | undefined;
  #untrack: (() => void) | undefined;
  #deadline: NodeJS.Timeout | undefined;
  #graceArmed = false;
  #grace: NodeJS.Timeout | undefined;
  /** Set when the turn's end begins: nothing stops it from then on. */
  #settling = false;
  /** A lease renewal in flight: the release waits for it. */
  #renewing: Promise<void> | undefined;

  constructor(deps: Deps, init: LiveTurnInit) {
    this.#deps = deps;
    this.conversationId = init.conversationId;
    this.userMessageId = init.userMessageId;
    this.assistantMessageId = init.assistantMessageId;
    this.provider = init.provider;
    this.model = init.model;
    this.billing = init.billing;
    this.userId = init.userId;
    this.userText = init.userText;
    this.charge = init.charge;
    this.toolbox = init.toolbox;
    this.pricing = init.pricing;
    this.log = init.log;
    this.#leaseToken = init.leaseToken;
    this.#key = init.key;
  }

  /** Aborted when the turn is stopped; every round and wait of the turn listens to it. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get cause(): StopCause | undefined {
    return this.#cause;
  }

  /** The turn's frame log (DESIGN §12), from `open`. */
  get frames(): TurnLog {
    if (this.#frames === undefined) throw new Error('the turn is not open');
    return this.#frames;
  }

  /**
   * The turn is running, in this order: its frame log opens (a stop asked for from any instance
   * reaches it; the lease is renewed; a drain stops it), its start frame is logged, its own client
   * attaches (`serve`: the request's stream, the turn's first follower), and from then on the turn
   * with no client left is stopped after the detach grace. Returns what `serve` returned.
   */
  start<T>(serve: () => T): T {
    this.#open();
    this.frames.append('start', startData(this));
    const served = serve();
    this.#armGrace();
    // A drain that began meanwhile will not wait for a stream it never saw.
    if (this.#deps.lifecycle.draining) this.stop('shutdown');
    return served;
  }

  /**
   * The turn's end, in this order: the reply stored and the charge settled (one statement), the lease
   * given back, the terminal frame logged (so a client that has seen it finds the reply stored and
   * may send its next message at once), and the turn no longer counted. Exactly once.
   * A reply whose end the database refused (an unreachable database is waited for: billing retries
   * until it is stored) ends with `error` SHUTTING_DOWN instead: what the crash sweeper will store for
   * it (interrupted, with the text its log holds, charged if it holds any), never a `done` whose
   * reply is not there. Answers whether the reply was stored.
   */
  async finish(end: statements.TurnEnd, produced: boolean, terminal: { readonly event: 'done' | 'error'; readonly data: string }): Promise<boolean> {
    if (this.#settling) throw new Error('a turn is finished once');
    this.#settling = true;
    const deps = this.#deps;
    const { heartbeat, renewal } = deps.streams;
    clearTimeout(this.#deadline);
    clearTimeout(this.#grace);
    // The tickers keep the lease and the signs of life up while billing rides out a database outage.
    let stored = true;
    try {
      await deps.billing.settle(this.charge, produced, statements.closingStatement(end));
    } catch (err) {
      stored = false;
      deps.metrics.settlementFailures.inc();
      this.log.error({ err, assistantMessageId: this.assistantMessageId, turnId: this.charge.turnId }, 'storing and settling the turn failed');
    }
    heartbeat.delete(this);
    renewal.delete(this);
    // The lease goes back after the statement, so the user's next turn reads this reply in its history. A
    // renewal still out would set it again after the release (a renewal takes back a lease it finds gone):
    // the user's next turn would be refused STREAM_IN_PROGRESS until it expired.
    await this.#renewing;
    try {
      await deps.leases.release(this.userId, this.#leaseToken);
    } catch (err) {
      this.log.error({ err }, 'releasing the stream lease failed');
    }
    // Not stored: as the crash sweeper will store it (closeCrashedReply).
    const left = repo.STREAMING_LEFT_BEHIND;
    if (stored) this.frames.end(terminal.event, terminal.data);
    else this.frames.end('error', errorData(left.error_code, left.error_retryable));
    this.#close(stored ? end.status : left.status);
    return stored;
  }

  #open(): void {
    this.#frames = this.#deps.frames.open(this.assistantMessageId, () => this.#snapshot(), {
      stop: () => this.stop('stopped'),
      attached: (n) => this.#attachedChanged(n),
    });
    const { heartbeat, renewal } = this.#deps.streams;
    heartbeat.add(this);
    renewal.add(this);
    this.#untrack = this.#deps.lifecycle.track(() => this.stop('shutdown'));
    this.#deadline = setTimeout(() => this.stop('deadline'), this.#deps.config.streamMaxDurationMs).unref();
    this.#deps.metrics.streamsOpen.inc();
  }

  /**
   * From now on, the turn with no client attached (on any instance) is stopped after
   * STREAM_DETACH_GRACE_MS (at once when 0), unless one attaches meanwhile (DESIGN §12).
   */
  #armGrace(): void {
    this.#graceArmed = true;
    this.#attachedChanged(this.frames.attached);
  }

  #attachedChanged(count: number): void {
    if (!this.#graceArmed) return;
    if (count > 0) {
      clearTimeout(this.#grace);
      this.#grace = undefined;
      return;
    }
    if (this.#grace !== undefined) return;
    const graceMs = this.#deps.config.streamDetachGraceMs;
    if (graceMs === 0) this.stop('client');
    else this.#grace = setTimeout(() => this.stop('client'), graceMs).unref();
  }

  /** DESIGN §13: what the rounds so far counted, priced. */
  receipt(): Receipt {
    return receiptOf(this.#usage.filter(Boolean), this.pricing);
  }

  /** DESIGN §12: the reply so far, for a client the log can no longer give every frame. */
  #snapshot(): string {
    const { text, parts } = this.parts;
    return snapshotData(this.assistantMessageId, 'streaming', text, apiParts(parts, text), this.#usage.length > 0 ? this.receipt() : undefined);
  }

  /** Stops the turn for `cause` unless it has stopped or begun to settle. */
  stop(cause: StopCause): void {
    if (this.#settling || this.#cause !== undefined) return;
    this.#cause = cause;
    this.#abort.abort(new Error(STOP_REASONS[cause]));
  }

  /**
   * DESIGN §13: the provider refused the turn's key (401/403): the stored key is marked unverified
   * with when and why (unless it was replaced meanwhile). A failure to mark is logged, never raised.
   */
  async keyRefused(status: number | undefined): Promise<void> {
    await markProviderKeyRejected(this.#deps, this.userId, this.#key, status).catch((err: unknown) =>
      this.log.error({ err }, 'marking a refused provider key failed'),
    );
  }

  /** One provider round on the user's key: the reply's events, in batches, as the provider streams them. */
  round(request: RoundRequest): AsyncIterator<readonly ChatEvent[]> {
    const { system, messages, tools, toolChoice } = request;
    const chat = {
      model: this.model,
      system,
      messages,
      maxTokens: MAX_OUTPUT_TOKENS,
      signal: this.#abort.signal,
      ...(tools.length > 0 ? { tools, toolChoice: toolChoice ?? 'auto' } : {}),
    };
    return this.#deps.llm.stream(this.provider, this.#key.apiKey, chat)[Symbol.asyncIterator]();
  }

  /** Where the next round's usage figures go: its latest figures are kept as they arrive. */
  usageOfNextRound(): (usage: RoundUsage) => void {
    const round = this.#usage.length;
    return (usage) => void (this.#usage[round] = usage);
  }

  /** After the last frame: the drain and the metrics no longer count the turn. */
  #close(outcome: statements.TurnEnd['status']): void {
    this.#untrack?.();
    this.#untrack = undefined;
    this.#deps.metrics.streamsOpen.dec();
    this.#deps.metrics.streamsTotal.inc({ provider: this.provider, outcome });
  }

  /**
   * The renewal ticker's call. A lease that vanished (expired during a stall, or a store restarted
   * empty) is taken back; one another stream of the user holds now ends this turn (DESIGN §4: one
   * stream per user).
   */
  renewLease(): Promise<void> {
    this.#renewing ??= this.#renew().finally(() => (this.#renewing = undefined));
    return this.#renewing;
  }

  async #renew(): Promise<void> {
    try {
      if (await this.#deps.leases.renew(this.userId, this.#leaseToken, LEASE_TTL_MS)) return;
      this.log.warn('stream lease taken by another stream of the user: ending this turn');
      this.stop('superseded');
    } catch (err) {
      this.log.warn({ err }, 'renewing the stream lease failed');
    }
  }

  /** The heartbeat's call: a sign of life for clients following the turn from other instances. */
  beat(): void {
    this.frames.alive();
  }

  /** The turn whose reservation the heartbeat marks alive, so no sweeper takes this turn for a crashed one. */
  get turnId(): string {
    return this.charge.turnId;
  }
}
