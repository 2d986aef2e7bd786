// Stream scripting shared by the three language-model fakes: what the next streamed answer looks
// like (text pieces, pacing, usage, how it ends or breaks) and a record of every stream request.
import type { ServerResponse } from 'node:http';
import type { RecordedRequest } from './http-fake.ts';
import { sleep } from './http-fake.ts';

export type FinishReason = 'stop' | 'length' | 'content_filter' | 'tool_calls';

/** A tool call the scripted model makes after its text (several: parallel calls in one round). */
export interface ScriptedCall {
  name: string;
  /** Arguments as a value (sent as its JSON), or `raw` text sent as it is (possibly invalid JSON). */
  arguments?: unknown;
  raw?: string;
  /** The provider's call id; generated when absent (Gemini: none is sent when absent). */
  id?: string;
  /** Split the argument text into this many streamed fragments (OpenAI-style and Anthropic). Default 3. */
  fragments?: number;
}

export interface ResolvedCall {
  id: string | undefined;
  name: string;
  /** The arguments' JSON text. */
  text: string;
  /** `text` in its streamed fragments. */
  pieces: string[];
}

export interface StreamScript {
  /** Text pieces, one provider chunk each. Default `['Hello', ' world']` (none when toolCalls are scripted). */
  chunks?: string[];
  /** Tool calls after the text; the round then finishes as the provider ends a round of calls. */
  toolCalls?: ScriptedCall[];
  /** Pause before every piece after the first and before the closing frames. */
  delayMs?: number;
  /** Token counts reported by the provider, each fake writing them in its own wire form. Default `{ input: 10, output: chunks.length }`. */
  usage?: ScriptedUsage;
  finishReason?: FinishReason;
  /** Answer the HTTP request with this status and the provider's own error body instead. */
  status?: number;
  /** After n pieces, send the provider's in-stream error frame and end the response. */
  errorAfterChunks?: number;
  /** After n pieces, destroy the socket abruptly. */
  dropAfterChunks?: number;
  /** After n pieces, send nothing more but keep the socket open (until the client or close()). */
  stallAfterChunks?: number;
  /**
   * After `afterChunks` pieces, send nothing until `until` settles, then go on: the test, not the clock,
   * decides when the turn moves past that point.
   */
  hold?: { afterChunks: number; until: Promise<unknown> };
  /** After n pieces, send a `data: {not json` line and end the response. */
  malformedAfterChunks?: number;
  /** Accept the request and never send even the status line (upstream silence before headers). */
  stallBeforeHeaders?: boolean;
}

export interface ResolvedScript extends StreamScript {
  chunks: string[];
  calls: ResolvedCall[];
  usage: ScriptedUsage;
  finishReason: FinishReason;
}

/**
 * Usage in one meaning (DESIGN §13): `input` counts every input token (cache reads and writes
 * included), `output` every output token (reasoning included); the rest are parts of those. A fake
 * splits them the way its provider reports them (Anthropic's cache apart from `input_tokens`,
 * Gemini's thoughts apart from `candidatesTokenCount`, DeepSeek's cache hits, OpenRouter's `cost`).
 */
export interface ScriptedUsage {
  input: number;
  output: number;
  /** Input tokens read from the provider's cache. */
  cached?: number;
  /** Input tokens written to the cache (Anthropic `cache_creation_input_tokens`). */
  cacheWrite?: number;
  /** Output tokens spent reasoning. */
  reasoning?: number;
  /** OpenRouter's reported cost in USD (default 0.0001). */
  cost?: number;
}

export interface StreamRecord {
  request: RecordedRequest;
  /** Resolves with Date.now() when the response ended or the socket closed, whoever closed it. */
  closed: Promise<number>;
  /** True once closed if the client went away before the fake finished (not set by drop/close()). */
  closedByClient: boolean;
}

/** Per-provider frame writers; the driver decides when each one is called. */
export interface StreamWriter {
  open(): void;
  piece(text: string, index: number): void;
  /** The round's tool calls, after the text. */
  calls(calls: ResolvedCall[]): void;
  /** Between two pieces (OpenRouter's keep-alive comments). */
  gap?(): void;
  finish(): void;
  error(): void;
  malformed(): void;
}

export interface StreamControl {
  streams: StreamRecord[];
  /** Script for every later stream request, until changed. */
  scriptStream(s: StreamScript): void;
  /** One-shot scripts, consumed (first in, first out) before the persistent one. */
  enqueueStream(s: StreamScript): void;
  /** Drops the one-shot scripts no request has taken (a test's leftovers must not play for the next): how many. */
  clearQueue(): number;
  /** Next script to play (consumes a queued one). */
  take(): ResolvedScript;
  /** Record a stream request and watch its response for closing. */
  track(request: RecordedRequest, res: ServerResponse): Tracked;
}

export interface Tracked {
  record: StreamRecord;
  /** Mark that the fake itself is about to close the socket (drop), so it is not the client's doing. */
  markSelfClosed(): void;
}

export function createStreamControl(lifetime: AbortSignal): StreamControl {
  let persistent: StreamScript = {};
  const queue: StreamScript[] = [];
  const streams: StreamRecord[] = [];
  return {
    streams,
    scriptStream(s) {
      persistent = { ...s };
    },
    enqueueStream(s) {
      queue.push({ ...s });
    },
    clearQueue() {
      return queue.splice(0).length;
    },
    take() {
      return resolveScript(queue.shift() ?? persistent);
    },
    track(request, res) {
      let selfClosed = false;
      let resolveClosed: (t: number) => void = () => undefined;
      const closed = new Promise<number>((r) => (resolveClosed = r));
      const record: StreamRecord = { request, closed, closedByClient: false };
      res.once('close', () => {
        record.closedByClient = !res.writableFinished && !selfClosed && !lifetime.aborted;
        resolveClosed(Date.now());
      });
      streams.push(record);
      return { record, markSelfClosed: () => void (selfClosed = true) };
    },
  };
}

export function resolveScript(s: StreamScript): ResolvedScript {
  const calls = (s.toolCalls ?? []).map(resolveCall);
  const chunks = s.chunks ?? (calls.length > 0 ? [] : ['Hello', ' world']);
  return {
    ...s,
    chunks,
    calls,
    usage: s.usage ?? { input: 10, output: chunks.length + calls.length },
    finishReason: s.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
  };
}

function resolveCall(c: ScriptedCall): ResolvedCall {
  const text = c.raw ?? JSON.stringify(c.arguments ?? {});
  const n = Math.max(1, c.fragments ?? 3);
  const size = Math.ceil(text.length / n) || 1;
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return { id: c.id, name: c.name, text, pieces };
}

/** Plays a script through a provider's writer. Stops as soon as the client or the fake goes away. */
export async function playScript(script: ResolvedScript, res: ServerResponse, tracked: Tracked, writer: StreamWriter, lifetime: AbortSignal): Promise<void> {
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  const signal = AbortSignal.any([gone.signal, lifetime]);
  const alive = (): boolean => !signal.aborted && !res.destroyed && !res.writableEnded;

  if (script.stallBeforeHeaders === true) return;
  writer.open();
  const n = script.chunks.length;
  for (let i = 0; i <= n; i++) {
    if (script.errorAfterChunks === i) {
      writer.error();
      res.end();
      return;
    }
    if (script.dropAfterChunks === i) {
      // Writes are corked until the next tick; let what was sent reach the client, then cut.
      await new Promise<void>((r) => setImmediate(r));
      tracked.markSelfClosed();
      res.destroy();
      return;
    }
    if (script.stallAfterChunks === i) return;
    if (script.hold?.afterChunks === i) {
      const gone = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await Promise.race([script.hold.until, gone]);
    }
    if (script.malformedAfterChunks === i) {
      writer.malformed();
      res.end();
      return;
    }
    if (i > 0 || i === n) await sleep(script.delayMs ?? 0, signal);
    if (!alive()) return;
    if (i === n) break;
    if (i > 0) writer.gap?.();
    writer.piece(script.chunks[i] ?? '', i);
  }
  if (script.calls.length > 0) writer.calls(script.calls);
  writer.finish();
  res.end();
}

/** Output tokens reported so far after piece i, for providers that report running totals. */
export function runningOutput(script: ResolvedScript, i: number): number {
  const n = script.chunks.length;
  return n === 0 ? script.usage.output : Math.round((script.usage.output * (i + 1)) / n);
}
