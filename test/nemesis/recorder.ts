// Everything every client saw: each HTTP status (and error code) and each frame (id, event, data) of
// each client's chain — one client's view of one turn, across its connections (a resume continues the
// chain on another instance with Last-Event-ID).
import http from 'node:http';
import { parseFrames, type Frame } from '../kits/conversations.ts';

export interface SeenFrame extends Frame {
  /** Which connection of the chain delivered it (0 = the first). */
  readonly conn: number;
  readonly at: number;
}

export type ChainRole = 'own' | 'follower' | 'probe' | 'resend';

export interface Connection {
  readonly instance: string;
  readonly lastEventId: number | undefined;
  status: number;
  code: string | undefined;
  /** The connection ended without a terminal frame (its instance died, or it was cut on purpose). */
  broken: boolean;
}

export interface Chain {
  readonly key: string;
  readonly user: string;
  readonly role: ChainRole;
  /** The assistant message (turn) id, from the start frame or the attach. */
  turn: string | undefined;
  conversationId: string | undefined;
  userMessageId: string | undefined;
  /** The pid of the instance the turn started on (own, probe and resend chains). */
  startedOnPid: number | undefined;
  readonly frames: SeenFrame[];
  readonly connections: Connection[];
  terminal: SeenFrame | undefined;
  /** Set when the client gave up before a terminal frame (the reason). */
  abandoned: string | undefined;
}

export interface HttpRecord {
  readonly what: string;
  readonly instance: string;
  readonly status: number;
  readonly code: string | undefined;
  readonly at: number;
}

export class Recorder {
  readonly chains: Chain[] = [];
  readonly http: HttpRecord[] = [];
  private n = 0;

  chain(user: string, role: ChainRole, init: Partial<Pick<Chain, 'turn' | 'conversationId' | 'userMessageId'>> = {}): Chain {
    const chain: Chain = {
      key: `${role}#${++this.n}`,
      user,
      role,
      turn: init.turn,
      conversationId: init.conversationId,
      userMessageId: init.userMessageId,
      startedOnPid: undefined,
      frames: [],
      connections: [],
      terminal: undefined,
      abandoned: undefined,
    };
    this.chains.push(chain);
    return chain;
  }

  status(what: string, instance: string, status: number, code: string | undefined): void {
    this.http.push({ what, instance, status, code, at: Date.now() });
  }
}

export const isTerminal = (f: Frame): boolean => f.event === 'done' || f.event === 'error';

export interface SseAnswer {
  status: number;
  /** The error envelope's code of a JSON answer. */
  code: string | undefined;
  json: unknown;
  retryAfter: number | undefined;
  /** For an event-stream answer: resolves when the response ends or its socket closes. */
  ended: Promise<void>;
  destroy(): void;
}

/**
 * Sends a request whose answer may be an event stream; each complete frame goes to `onFrame` as it
 * arrives. A network failure (refused, reset) answers status 0.
 */
export function request(
  url: string,
  opts: { method: string; headers: Record<string, string>; body?: string; onFrame?: (f: Frame) => void; timeoutMs?: number },
): Promise<SseAnswer> {
  return new Promise((resolve) => {
    let settled = false;
    let resolveEnded: () => void = () => undefined;
    const ended = new Promise<void>((r) => (resolveEnded = r));
    const headers = { ...opts.headers, ...(opts.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(opts.body)) }) };
    const req = http.request(url, { method: opts.method, headers });
    const done = (a: Omit<SseAnswer, 'ended' | 'destroy'>): void => {
      if (settled) return;
      settled = true;
      resolve({ ...a, ended, destroy: () => req.destroy() });
    };
    // A frozen dependency may hold an answer for a while; a silent instance (SIGSTOP'd store behind it) is not forever.
    req.setTimeout(opts.timeoutMs ?? 60_000, () => req.destroy(new Error('timeout')));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const retryAfter = res.headers['retry-after'] === undefined ? undefined : Number(res.headers['retry-after']);
      const sse = String(res.headers['content-type'] ?? '').startsWith('text/event-stream');
      res.setEncoding('utf8');
      if (sse) {
        let buffer = '';
        done({ status, code: undefined, json: undefined, retryAfter });
        res.on('data', (chunk: string) => {
          buffer += chunk;
          const end = buffer.lastIndexOf('\n\n');
          if (end < 0) return;
          const complete = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          for (const f of parseFrames(complete).frames) opts.onFrame?.(f);
        });
        res.on('end', resolveEnded);
        res.on('close', resolveEnded);
        res.on('error', () => resolveEnded());
        return;
      }
      let text = '';
      res.on('data', (c: string) => (text += c));
      const finish = (): void => {
        let json: unknown;
        try {
          json = text === '' ? undefined : JSON.parse(text);
        } catch {
          json = text;
        }
        const code = (json as { error?: { code?: string } } | undefined)?.error?.code;
        done({ status, code, json, retryAfter });
        resolveEnded();
      };
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
    });
    req.on('error', () => {
      done({ status: 0, code: 'NETWORK', json: undefined, retryAfter: undefined });
      resolveEnded();
    });
    req.end(opts.body);
  });
}
