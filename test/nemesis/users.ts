// The load: users each doing, one thing after another, streamed turns (short, long, with tools) with
// followers and resumes on other instances, stops, fence probes (a second start while one is live),
// resends of turns the service cut, key saves, trade creates and imports, and purchases completed
// through signed webhooks delivered more than once. Everything every client saw goes to the Recorder.
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import type { Frame } from '../kits/conversations.ts';
import { makeStripeEvent, type OpenAiCompatibleFake, type StripeFake } from '../fakes/index.ts';
import type { Cluster } from '../cluster/cluster.ts';
import { pidOf, type Fleet, type Slot } from './fleet.ts';
import type { Prng } from './prng.ts';
import { isTerminal, request, type Chain, type Recorder, type SseAnswer } from './recorder.ts';

/** Priced at 5 credits a turn by the built-in catalogue; gpt-4o-mini is an allowance model. */
export const MODELS = ['gpt-4.1', 'gpt-4o-mini'] as const;
const SIDE_BOUND_MS = 90_000;

export interface World {
  readonly rec: Recorder;
  readonly fleet: Fleet;
  readonly cluster: Cluster;
  readonly fake: OpenAiCompatibleFake;
  readonly stripe: StripeFake;
  readonly webhookSecret: string;
  log(line: string): void;
}

export interface Purchase {
  readonly user: string;
  readonly sessionId: string;
  readonly credits: number;
  /** A delivery of its webhook was answered 2xx. */
  acknowledged: boolean;
  deliveries: number;
}

export interface Resend {
  readonly user: string;
  readonly cutTurn: string;
  readonly how: 'same-id' | 'replaces';
  /** The chain of the resend (its start frame names the new turn; a same-id resend replays the cut one). */
  readonly chain: Chain;
}

export interface FenceProbe {
  readonly user: string;
  readonly liveTurn: string;
  readonly status: number;
  readonly code: string | undefined;
  /** The turn a probe started (it should not have). */
  readonly admittedTurn: string | undefined;
}

export interface UserState {
  readonly id: string;
  readonly model: (typeof MODELS)[number];
  readonly rng: Prng;
  accountId: string | undefined;
  /** externalIds of trades the service acknowledged (201/200 on create, or in a 200 import report). */
  readonly trades: Set<string>;
  keySaves: number;
  conversationId: string | undefined;
  turns: number;
  seq: number;
}

export interface LoadResult {
  readonly users: UserState[];
  readonly purchases: Purchase[];
  readonly resends: Resend[];
  readonly probes: FenceProbe[];
  /** Stops the nemesis asked for (the turn ids). */
  readonly stops: Set<string>;
}

interface Answer {
  status: number;
  code: string | undefined;
  json: unknown;
  retryAfter: number | undefined;
}

/** Stripe's own signer of test deliveries (the `Stripe-Signature` header), as Stripe signs them. */
const signer = new Stripe('sk_test_nemesis').webhooks;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class Load {
  readonly result: LoadResult = { users: [], purchases: [], resends: [], probes: [], stops: new Set() };
  private readonly w: World;
  private stopping = false;

  constructor(w: World) {
    this.w = w;
  }

  /** A live instance (other than `not` when there is one). */
  private slot(u: UserState, not?: string): Slot | undefined {
    const live = this.w.fleet.live();
    const others = live.filter((s) => s.instance.url !== not);
    return others.length > 0 ? u.rng.pick(others) : live[0];
  }

  private async headers(u: UserState, json: boolean): Promise<Record<string, string>> {
    return { authorization: `Bearer ${await this.w.cluster.token(u.id)}`, ...(json ? { 'content-type': 'application/json' } : {}) };
  }

  /** One JSON call, recorded. Status 0: no instance answered (refused, reset or none up). */
  async call(u: UserState, what: string, method: string, path: string, body?: unknown, raw?: { type: string; text: string }): Promise<Answer> {
    const s = this.slot(u);
    if (!s) return { status: 0, code: 'NO_INSTANCE', json: undefined, retryAfter: undefined };
    const headers = await this.headers(u, body !== undefined);
    if (raw) headers['content-type'] = raw.type;
    const a = await request(`${s.instance.url}${path}`, { method, headers, body: raw ? raw.text : body === undefined ? undefined : JSON.stringify(body) });
    this.w.rec.status(what, s.instance.url, a.status, a.code);
    return a;
  }

  /** A call tried again while the service is unreachable or says to come back (0, 503, 429), within the bound. */
  async retried(u: UserState, what: string, method: string, path: string, body?: unknown, raw?: { type: string; text: string }): Promise<Answer> {
    const deadline = Date.now() + SIDE_BOUND_MS;
    for (;;) {
      const a = await this.call(u, what, method, path, body, raw);
      if (![0, 503, 429].includes(a.status) || Date.now() > deadline) return a;
      await sleep(a.retryAfter !== undefined ? Math.min(a.retryAfter, 5) * 1000 : 300);
    }
  }

  /** Key saved, an account, and credits bought (completed by webhook) for every user, before the faults. */
  async setUp(u: UserState, fakeKey: string): Promise<void> {
    const key = await this.retried(u, 'key save', 'PUT', '/api/advisor/provider-keys/openai', { apiKey: fakeKey, defaultModel: u.model });
    if (key.status !== 200) throw new Error(`set-up key save of ${u.id}: ${key.status} ${JSON.stringify(key.json)}`);
    u.keySaves++;
    const acc = await this.retried(u, 'account create', 'POST', '/api/accounts', {
      name: `nemesis ${u.id.slice(-8)}`,
      currency: 'usd',
      timezone: 'America/New_York',
      startingBalance: '10000',
    });
    if (acc.status !== 201) throw new Error(`set-up account of ${u.id}: ${acc.status} ${JSON.stringify(acc.json)}`);
    u.accountId = (acc.json as { id: string }).id;
    await this.purchase(u, 'credits_1500');
  }

  stop(): void {
    this.stopping = true;
  }

  /** The user's loop until `stop()` (then it finishes what it is doing). */
  async run(u: UserState): Promise<void> {
    while (!this.stopping) {
      const r = u.rng.next();
      try {
        if (r < 0.7) await this.turn(u);
        else if (r < 0.78) await this.tradeCreate(u);
        else if (r < 0.83) await this.tradeImport(u);
        else if (r < 0.85) await this.purchase(u, 'credits_500');
        else if (r < 0.88 && u.keySaves < 8) await this.keySave(u);
      } catch (err) {
        this.w.log(`user ${u.id}: ${(err as Error).stack ?? String(err)}`);
      }
      // A trader's pause: it keeps each user under the 30 streamed messages a minute of DESIGN §4.
      await sleep(u.rng.int(200, 1500));
    }
  }

  private async keySave(u: UserState): Promise<void> {
    u.keySaves++;
    await this.retried(u, 'key save', 'PUT', '/api/advisor/provider-keys/openai', { apiKey: this.w.fake.validKey, defaultModel: u.model });
  }

  private async tradeCreate(u: UserState): Promise<void> {
    if (!u.accountId) return;
    const n = ++u.seq;
    const externalId = `c-${n}`;
    const body = {
      symbol: u.rng.pick(['AAPL', 'NVDA', 'MSFT']),
      side: u.rng.pick(['buy', 'sell']),
      quantity: String(u.rng.int(1, 9)),
      price: '101.5',
      executedAt: minute(n),
      externalId,
    };
    // A create whose answer was lost is sent again, the same: the externalId makes it stored once.
    const a = await this.retried(u, 'trade create', 'POST', `/api/accounts/${u.accountId}/trades`, body);
    if (a.status === 201 || a.status === 200) u.trades.add(externalId);
  }

  private async tradeImport(u: UserState): Promise<void> {
    if (!u.accountId) return;
    const rows = Array.from({ length: 3 }, () => {
      const n = ++u.seq;
      return { externalId: `i-${n}`, line: `MSFT,${u.rng.pick(['buy', 'sell'])},${u.rng.int(1, 9)},300.25,0,${minute(n)},i-${n},nemesis` };
    });
    const csv = ['symbol,side,quantity,price,fee,executedAt,externalId,note', ...rows.map((r) => r.line)].join('\n');
    const a = await this.retried(u, 'trade import', 'POST', `/api/accounts/${u.accountId}/trades/import`, undefined, { type: 'text/csv', text: csv });
    if (a.status === 200) {
      const report = a.json as { imported: number; duplicates: number; rejectedCount: number };
      if (report.rejectedCount === 0) for (const r of rows) u.trades.add(r.externalId);
      else this.w.log(`user ${u.id}: import rejected rows: ${JSON.stringify(a.json)}`);
    }
  }

  /** A checkout, then Stripe's `checkout.session.completed` delivered 2–3 times (one as a distinct event object) to any instance. */
  private async purchase(u: UserState, packId: string): Promise<void> {
    const co = await this.retried(u, 'checkout', 'POST', '/api/billing/checkout', { packId });
    if (co.status !== 200) return;
    const sessionId = (co.json as { sessionId: string }).sessionId;
    const p: Purchase = { user: u.id, sessionId, credits: packId === 'credits_1500' ? 1500 : 500, acknowledged: false, deliveries: 0 };
    this.result.purchases.push(p);
    const session = this.w.stripe.completeSession(sessionId);
    const event = JSON.stringify(makeStripeEvent('checkout.session.completed', session));
    const copies = [event, event, ...(u.rng.chance(0.5) ? [JSON.stringify(makeStripeEvent('checkout.session.completed', session))] : [])];
    for (const payload of copies) {
      // Stripe retries a delivery until it gets a 2xx.
      const deadline = Date.now() + SIDE_BOUND_MS;
      for (;;) {
        const s = this.slot(u);
        const a = s
          ? await request(`${s.instance.url}/api/billing/webhooks/stripe`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'stripe-signature': signer.generateTestHeaderString({ payload, secret: this.w.webhookSecret }) },
              body: payload,
            })
          : undefined;
        if (s && a) this.w.rec.status('stripe webhook', s.instance.url, a.status, a.code);
        p.deliveries++;
        if (a && a.status >= 200 && a.status < 300) {
          p.acknowledged = true;
          break;
        }
        if ((a && a.status >= 400 && a.status < 500) || Date.now() > deadline) break;
        await sleep(300);
      }
    }
  }

  /** Starts a turn (or a resend) on an instance; the chain records what its client saw. Undefined when refused. */
  private async startTurn(
    u: UserState,
    role: 'own' | 'resend' | 'probe',
    path: string,
    body: Record<string, unknown>,
    not?: string,
  ): Promise<{ chain: Chain; answer: SseAnswer; started: Promise<void> } | { refused: Answer }> {
    const s = this.slot(u, not);
    if (!s) return { refused: { status: 0, code: 'NO_INSTANCE', json: undefined, retryAfter: undefined } };
    const chain = this.w.rec.chain(u.id, role);
    chain.startedOnPid = pidOf(s.instance);
    let resolveStarted: () => void = () => undefined;
    const started = new Promise<void>((r) => (resolveStarted = r));
    const answer = await request(`${s.instance.url}${path}`, {
      method: 'POST',
      headers: await this.headers(u, true),
      body: JSON.stringify(body),
      onFrame: (f) => {
        this.see(chain, f);
        if (f.event === 'start') resolveStarted();
      },
    });
    this.w.rec.status(`stream start (${role})`, s.instance.url, answer.status, answer.code);
    chain.connections.push({ instance: s.instance.url, lastEventId: undefined, status: answer.status, code: answer.code, broken: false });
    if (answer.status !== 200) return { refused: answer };
    return { chain, answer, started };
  }

  private see(chain: Chain, f: Frame): void {
    chain.frames.push({ ...f, conn: chain.connections.length, at: Date.now() });
    if (f.event === 'start') {
      chain.turn = String(f.data['assistantMessageId']);
      chain.conversationId = String(f.data['conversationId']);
      chain.userMessageId = String(f.data['userMessageId']);
    }
    if (f.event === 'snapshot' && chain.turn === undefined) chain.turn = String(f.data['assistantMessageId']);
    if (isTerminal(f) && chain.terminal === undefined) chain.terminal = chain.frames.at(-1);
  }

  /** Follows a chain to its terminal frame: each broken connection is resumed on another instance with Last-Event-ID. */
  private async finish(u: UserState, chain: Chain, ended: Promise<void>): Promise<void> {
    await ended;
    const deadline = Date.now() + SIDE_BOUND_MS;
    while (chain.terminal === undefined) {
      const last = chain.connections.at(-1);
      if (last) last.broken = true;
      if (Date.now() > deadline) {
        chain.abandoned = `no terminal frame within ${SIDE_BOUND_MS} ms of resuming`;
        return;
      }
      const a = await this.attach(u, chain, last?.instance);
      if (a === undefined) continue;
      await a.ended;
    }
  }

  /** GET …/stream on an instance other than `not`, after the chain's last id; undefined when refused (after a pause). */
  private async attach(u: UserState, chain: Chain, not?: string): Promise<SseAnswer | undefined> {
    const s = this.slot(u, not);
    if (!s || !chain.conversationId) {
      await sleep(300);
      return undefined;
    }
    const lastId = [...chain.frames].reverse().find((f) => f.id !== undefined)?.id;
    const headers = await this.headers(u, false);
    if (lastId !== undefined) headers['last-event-id'] = String(lastId);
    const conn = { instance: s.instance.url, lastEventId: lastId, status: 0, code: undefined as string | undefined, broken: false };
    chain.connections.push(conn);
    const a = await request(`${s.instance.url}/api/advisor/conversations/${chain.conversationId}/stream`, {
      method: 'GET',
      headers,
      onFrame: (f) => this.see(chain, f),
    });
    conn.status = a.status;
    conn.code = a.code;
    this.w.rec.status(lastId === undefined ? 'attach (follower)' : 'attach (resume)', s.instance.url, a.status, a.code);
    if (a.status === 200) return a;
    if (a.status === 204) {
      chain.abandoned = 'attach answered 204 (no turn)';
      chain.terminal = undefined;
    }
    await sleep(a.retryAfter !== undefined ? Math.min(a.retryAfter, 5) * 1000 : 300);
    return undefined;
  }

  private async turn(u: UserState): Promise<void> {
    const rng = u.rng;
    const kind = rng.pick(['short', 'long', 'long', 'slow', 'tools'] as const);
    // A slow reply (about 6 s) outlives a drain (2 s): a SIGTERM cuts it.
    if (kind === 'slow') this.w.fake.enqueueStream({ chunks: Array.from({ length: 50 }, (_, i) => `slow${i} `), delayMs: 120 });
    if (kind === 'short') this.w.fake.enqueueStream({ chunks: ['Short ', 'answer ', `${rng.int(1, 999)}.`], delayMs: 20 });
    if (kind === 'tools') this.w.fake.enqueueStream({ chunks: ['Let me look. '], toolCalls: [{ name: 'list_my_accounts', arguments: {} }] });
    const continuing = u.conversationId !== undefined && rng.chance(0.7);
    const path = `/api/advisor/conversations/${continuing ? u.conversationId : 'new'}/messages/stream`;
    const body = { text: `question ${++u.seq} from ${u.id.slice(-6)}`, clientMessageId: randomUUID() };
    const own = await this.startOwn(u, 'own', path, body);
    if (own === undefined) return;
    u.turns++;
    await this.afterTurn(u, own, path, body, 0);
  }

  /** Starts a turn, with its side clients; resolves when every client of it reached a terminal frame (or gave up). */
  private async startOwn(u: UserState, role: 'own' | 'resend', path: string, body: Record<string, unknown>): Promise<Chain | undefined> {
    const rng = u.rng;
    const deadline = Date.now() + SIDE_BOUND_MS;
    let started: Awaited<ReturnType<Load['startTurn']>>;
    for (;;) {
      started = await this.startTurn(u, role, path, body);
      if (!('refused' in started)) break;
      const { status, code, retryAfter } = started.refused;
      // Refusals the service may give under faults or limits: come back later (a resend must get through).
      const again = status === 0 || status === 503 || status === 429 || (status === 409 && code === 'STREAM_IN_PROGRESS');
      if (role === 'own' && status === 429) await sleep(Math.min(retryAfter ?? 1, 5) * 1000);
      if (!again || role === 'own' || Date.now() > deadline) return undefined;
      await sleep(retryAfter !== undefined ? Math.min(retryAfter, 5) * 1000 : 500);
    }
    const { chain, answer } = started;
    const sides: Promise<void>[] = [];
    const own = this.finish(u, chain, answer.ended);
    await Promise.race([started.started, answer.ended]);
    if (chain.turn !== undefined && chain.terminal === undefined) {
      const here = chain.connections[0]?.instance;
      if (rng.chance(0.35)) sides.push(this.follower(u, chain, here));
      if (rng.chance(0.3)) sides.push(this.probe(u, chain, here));
      if (rng.chance(0.08)) sides.push(this.stopSoon(u, chain));
      // The client drops its connection on purpose and resumes elsewhere with Last-Event-ID.
      if (rng.chance(0.15)) {
        const after = rng.int(1, 6);
        sides.push(
          (async () => {
            while (chain.terminal === undefined && chain.frames.filter((f) => f.event === 'delta').length < after && chain.connections.length === 1)
              await sleep(20);
            if (chain.terminal === undefined && chain.connections.length === 1) answer.destroy();
          })(),
        );
      }
    }
    await own;
    await Promise.all(sides);
    if (chain.conversationId) u.conversationId = chain.conversationId;
    return chain;
  }

  /** What follows a turn: a turn the service cut (drain, crash) is sent again, as the same message or as its replacement. */
  private async afterTurn(u: UserState, chain: Chain, path: string, body: { text: string; clientMessageId: string }, depth: number): Promise<void> {
    if (!this.cutByService(chain) || depth >= 2 || chain.turn === undefined || this.stopping) return;
    const how = u.rng.chance(0.5) ? 'same-id' : 'replaces';
    const cutTurn = chain.turn;
    const again =
      how === 'same-id'
        ? { path, body }
        : {
            path: `/api/advisor/conversations/${chain.conversationId}/messages/stream`,
            body: { text: body.text, clientMessageId: randomUUID(), replaces: chain.userMessageId },
          };
    const resent = await this.startOwn(u, 'resend', again.path, again.body);
    if (resent === undefined) return;
    this.result.resends.push({ user: u.id, cutTurn, how, chain: resent });
    // The same message replayed the cut reply (no new turn): sending it yet again changes nothing.
    if (resent.turn === cutTurn) return;
    await this.afterTurn(u, resent, again.path, again.body as { text: string; clientMessageId: string }, depth + 1);
  }

  /**
   * A turn the service cut (DESIGN §7): it ended `error SHUTTING_DOWN` — a drain, or the reply closed
   * for a dead instance (the sweeper's, or an attach's after the crash). Not a stop, not a detach grace
   * that ran out, not the provider's failure.
   */
  cutByService(chain: Chain): boolean {
    const t = chain.terminal;
    return t !== undefined && chain.turn !== undefined && t.event === 'error' && t.data['code'] === 'SHUTTING_DOWN';
  }

  private async follower(u: UserState, own: Chain, not?: string): Promise<void> {
    const chain = this.w.rec.chain(u.id, 'follower', { turn: own.turn, conversationId: own.conversationId, userMessageId: own.userMessageId });
    const deadline = Date.now() + SIDE_BOUND_MS;
    // The first attach starts from the first frame (no Last-Event-ID); later ones resume after the last id seen.
    while (chain.terminal === undefined && chain.abandoned === undefined) {
      if (Date.now() > deadline) {
        chain.abandoned = `no terminal frame within ${SIDE_BOUND_MS} ms`;
        return;
      }
      const last = chain.connections.at(-1);
      if (last && last.status === 200) last.broken = true;
      const a = await this.attach(u, chain, last?.instance ?? not);
      if (a) await a.ended;
    }
  }

  /** DESIGN §7/§12: a second start while the user's turn is live → 409 STREAM_IN_PROGRESS. */
  private async probe(u: UserState, live: Chain, not?: string): Promise<void> {
    const body = { text: `probe ${++u.seq}`, clientMessageId: randomUUID() };
    const p = await this.startTurn(u, 'probe', '/api/advisor/conversations/new/messages/stream', body, not);
    if ('refused' in p) {
      this.result.probes.push({ user: u.id, liveTurn: live.turn ?? '', status: p.refused.status, code: p.refused.code, admittedTurn: undefined });
      return;
    }
    await this.finish(u, p.chain, p.answer.ended);
    this.result.probes.push({ user: u.id, liveTurn: live.turn ?? '', status: 200, code: undefined, admittedTurn: p.chain.turn });
  }

  private async stopSoon(u: UserState, chain: Chain): Promise<void> {
    while (chain.terminal === undefined && !chain.frames.some((f) => f.event === 'delta')) await sleep(20);
    if (chain.terminal !== undefined || chain.turn === undefined) return;
    this.result.stops.add(chain.turn);
    await this.retried(u, 'stop', 'POST', `/api/advisor/conversations/${chain.conversationId}/stop`);
  }
}

/** A past minute per sequence number (fills must not be in the future). */
function minute(n: number): string {
  return new Date(Date.UTC(2026, 2, 2, 14, 0) + n * 60_000).toISOString().replace('.000Z', 'Z');
}
