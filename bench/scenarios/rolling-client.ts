// The users of the rolling-restart row, each behaving as a real client of several instances does
// (DESIGN §7, §12, and the web client's "Send again"): a message is sent to the next instance in turn;
// a request that reached no instance, or one that was draining (503), is sent again with the same
// clientMessageId to another; a stream cut before its terminal frame (by a stopping instance, or by the
// client's own flaky network: CUT_SHARE of the turns) is resumed on another instance with Last-Event-ID;
// a reply that ended with SHUTTING_DOWN is sent again with a new clientMessageId in its place
// (`replaces`). Every frame is parsed and kept to what checking needs: ids, text, the end.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseFrames, type Frame } from '../../test/kits/conversations.ts';
import { QUESTION } from './targets.ts';

/** A message that has no terminal frame by then is lost. */
const TURN_DEADLINE_MS = 60_000;
/** A connection that brings nothing for this long (heartbeats come every 15 s) is given up and the turn resumed. */
const SILENCE_MS = 40_000;
/** DESIGN §4: 30 streamed messages per rolling 60 s; the client keeps under it, retries included. */
const LIMIT = { messages: 28, windowMs: 60_000 };
export const MESSAGES_PER_CONVERSATION = 5;
/** A flaky network: this share of turns has its first stream cut by the client after 1 to 30 deltas (then resumed elsewhere). */
export const CUT_SHARE = 0.05;

/** One turn (one clientMessageId) as its client saw it, across every connection it took. */
export class TurnView {
  readonly clientMessageId: string;
  conversationId: string | undefined;
  userMessageId: string | undefined;
  assistantMessageId: string | undefined;
  lastId = 0;
  text = '';
  end: { readonly event: string; readonly code: string | undefined; readonly finishReason: string | undefined; readonly at: number } | undefined;
  /** Frames whose id the client had already, and ids skipped (no snapshot in their place). */
  repeated = 0;
  skipped = 0;
  /** A later turn took this one's place (sent again after SHUTTING_DOWN): its rows are gone by design. */
  replaced = false;

  constructor(clientMessageId: string, conversationId: string | undefined) {
    this.clientMessageId = clientMessageId;
    this.conversationId = conversationId;
  }

  take(f: Frame): void {
    const id = f.id ?? NaN;
    if (!(id > this.lastId)) {
      this.repeated++;
      return;
    }
    if (f.event !== 'snapshot' && id !== this.lastId + 1) this.skipped++;
    this.lastId = id;
    const d = f.data;
    if (f.event === 'start') {
      this.conversationId = String(d['conversationId']);
      this.userMessageId = String(d['userMessageId']);
      this.assistantMessageId = String(d['assistantMessageId']);
    } else if (f.event === 'delta') {
      this.text += String(d['text']);
    } else if (f.event === 'snapshot') {
      this.text = String(d['text']);
    } else if (f.event === 'done' || f.event === 'error') {
      const code = typeof d['code'] === 'string' ? d['code'] : undefined;
      const finishReason = typeof d['finishReason'] === 'string' ? d['finishReason'] : undefined;
      this.end = { event: f.event, code, finishReason, at: performance.now() };
    }
  }

  /** An idempotent retry replays the whole reply from its first frame: what was assembled is dropped. */
  restart(): void {
    this.lastId = 0;
    this.text = '';
  }
}

type Exchange =
  /** No answer: refused, reset or cut before a status line. */
  | { readonly kind: 'unreached' }
  /** An answer other than a stream. */
  | { readonly kind: 'answered'; readonly status: number; readonly code: string | undefined; readonly retryAfterMs: number | undefined }
  /** A stream, read until it ended or was cut; its frames went to the turn as they came. */
  | { readonly kind: 'streamed' };

/** The load: users sending messages to the instances in turn, and what they saw. */
export class Load {
  readonly turns: TurnView[] = [];
  /** Each message a user sent: from its first request to the end of its last turn (a resend after SHUTTING_DOWN included). */
  readonly messages: { readonly sentAt: number; readonly endedAt: number; readonly done: boolean }[] = [];
  /** Retries, resumes and refusals by kind. */
  readonly events = new Map<string, number>();
  readonly #urls: readonly string[];
  readonly #agent: http.Agent;
  #next = 0;
  #closed = false;

  constructor(urls: readonly string[], agent: http.Agent) {
    this.#urls = urls;
    this.#agent = agent;
  }

  /** Every user gives up at once (the row failed): no message is sent or followed further. */
  close(): void {
    this.#closed = true;
  }

  /** A user sending a message every `paceMs` (or when the last one ended, if later) until `stopping()`. */
  async user(token: string, paceMs: number, firstAfterMs: number, stopping: () => boolean): Promise<void> {
    const sent: number[] = [];
    let conversation: string | undefined;
    let inConversation = 0;
    let due = performance.now() + firstAfterMs;
    for (let k = 0; !stopping() && !this.#closed; k++) {
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      due = performance.now() + paceMs;
      if (inConversation >= MESSAGES_PER_CONVERSATION) [conversation, inConversation] = [undefined, 0];
      const text = `${QUESTION} (${k + 1})`;
      const sentAt = performance.now();
      let turn = await this.#deliver(token, sent, new TurnView(randomUUID(), conversation), text, undefined);
      // DESIGN §7 / the web client's "Send again": the same message again, taking the interrupted turn's place.
      while (turn.end?.code === 'SHUTTING_DOWN' && !stopping() && turn.userMessageId !== undefined) {
        this.#count('sent again after SHUTTING_DOWN');
        turn.replaced = true;
        turn = await this.#deliver(token, sent, new TurnView(randomUUID(), turn.conversationId), text, turn.userMessageId);
      }
      this.messages.push({ sentAt, endedAt: performance.now(), done: turn.end?.event === 'done' });
      if (turn.end?.event === 'done') {
        conversation = turn.conversationId;
        inConversation++;
      } else {
        [conversation, inConversation] = [undefined, 0];
      }
    }
  }

  /** Sends one message and follows its turn to its terminal frame, across instances; without one by the deadline it is lost. */
  async #deliver(token: string, sent: number[], turn: TurnView, text: string, replaces: string | undefined): Promise<TurnView> {
    this.turns.push(turn);
    const deadline = performance.now() + TURN_DEADLINE_MS;
    const target = turn.conversationId;
    const body = JSON.stringify({ text, clientMessageId: turn.clientMessageId, ...(replaces === undefined ? {} : { replaces }) });
    let at = this.#next++ % this.#urls.length;
    let cutAfter = Math.random() < CUT_SHARE ? 1 + Math.floor(Math.random() * 30) : undefined;
    const another = (): void => void (at = (at + 1) % this.#urls.length);
    while (turn.end === undefined && performance.now() < deadline && !this.#closed) {
      if (turn.assistantMessageId !== undefined) {
        // The turn runs (or ran) somewhere: attach to it on another instance after the last frame held.
        another();
        this.#count('resume (GET …/stream with Last-Event-ID)');
        const r = await this.#exchange(at, 'GET', `/api/advisor/conversations/${turn.conversationId}/stream`, token, undefined, turn);
        if (r.kind === 'streamed') {
          if (turn.end === undefined) this.#count('resumed stream cut before its terminal frame');
          continue;
        }
        this.#count(`resume ${describe(r)}`);
        if (r.kind === 'answered' && r.status === 204) {
          // The instance says the client has the end already; it has not. The stored reply, replayed, says the rest.
          turn.assistantMessageId = undefined;
          turn.restart();
        } else {
          await sleep(r.kind === 'answered' ? (r.retryAfterMs ?? 250) : 100);
        }
        continue;
      }
      await this.#underLimit(sent);
      sent.push(performance.now());
      const path = `/api/advisor/conversations/${target ?? 'new'}/messages/stream`;
      turn.restart();
      const r = await this.#exchange(at, 'POST', path, token, body, turn, cutAfter);
      cutAfter = undefined;
      if (r.kind === 'streamed') {
        if (turn.end === undefined && turn.assistantMessageId === undefined) {
          this.#count('POST cut before its start frame');
          another();
        }
        continue;
      }
      this.#count(`POST ${describe(r)}`);
      // No instance counted it: it reached none, or one refused it at admission (draining) before the limit counts.
      if (r.kind === 'unreached' || r.status === 503) sent.pop();
      if (r.kind === 'unreached') {
        another();
        await sleep(100);
      } else if (r.status === 503 || r.status === 429 || (r.status === 409 && r.code === 'STREAM_IN_PROGRESS')) {
        // Draining, the limit, or this message's turn still streaming (its start frame never came): again with the same id.
        another();
        await sleep(r.retryAfterMs ?? (r.status === 409 ? 1000 : 250));
      } else {
        turn.end = { event: `refused ${r.status}`, code: r.code, finishReason: undefined, at: performance.now() };
      }
    }
    if (turn.end === undefined) this.#count('lost: no terminal frame by the deadline');
    return turn;
  }

  /** Waits until one more request stays within the user's limit (DESIGN §4). */
  async #underLimit(sent: number[]): Promise<void> {
    for (;;) {
      const now = performance.now();
      while ((sent[0] ?? Infinity) <= now - LIMIT.windowMs) sent.shift();
      if (sent.length < LIMIT.messages) return;
      await sleep((sent[0] ?? now) + LIMIT.windowMs - now + 10);
    }
  }

  #count(what: string): void {
    this.events.set(what, (this.events.get(what) ?? 0) + 1);
  }

  /** One request to instance `at`; a stream's frames go to `turn` as they arrive (the client cuts it after `cutAfter` deltas, if given). */
  #exchange(at: number, method: 'GET' | 'POST', path: string, token: string, body: string | undefined, turn: TurnView, cutAfter?: number): Promise<Exchange> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'text/event-stream' };
    if (body !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
    if (method === 'GET') headers['last-event-id'] = String(turn.lastId);
    return new Promise((resolve) => {
      let settled = false;
      const done = (e: Exchange): void => {
        if (!settled) resolve(e);
        settled = true;
      };
      let responded = false;
      const req = http.request(new URL(path, this.#urls[at]), { method, agent: this.#agent, headers });
      req.setTimeout(SILENCE_MS, () => req.destroy());
      // After a status line the response's own close settles it.
      req.on('error', () => responded || done({ kind: 'unreached' }));
      req.on('response', (res) => {
        responded = true;
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          const answered = (): void => {
            const code = /"code":"([A-Z_]+)"/.exec(text)?.[1];
            const retryAfter = Number(res.headers['retry-after']);
            done({ kind: 'answered', status, code, retryAfterMs: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined });
          };
          res.on('end', answered);
          res.on('close', answered);
          return;
        }
        let pending = '';
        let deltas = 0;
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          pending += c;
          const cut = pending.lastIndexOf('\n\n');
          if (cut < 0) return;
          for (const f of parseFrames(pending.slice(0, cut + 2)).frames) {
            turn.take(f);
            if (f.event === 'delta') deltas++;
          }
          pending = pending.slice(cut + 2);
          if (cutAfter !== undefined && deltas >= cutAfter && turn.end === undefined) {
            this.#count('stream cut by its client (a flaky network)');
            cutAfter = undefined;
            req.destroy();
          }
        });
        res.on('close', () => done({ kind: 'streamed' }));
      });
      req.end(body);
    });
  }
}

function describe(r: Exchange): string {
  if (r.kind === 'unreached') return 'reached no instance';
  if (r.kind === 'streamed') return 'streamed';
  return `answered ${r.status}${r.code === undefined ? '' : ` ${r.code}`}`;
}
