// Fake of Anthropic's Messages API: x-api-key + anthropic-version headers, cursor-paginated model
// list, and the named-event SSE stream (message_start … message_stop, in-stream `event: error`).
import type { ServerResponse } from 'node:http';
import type { FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
import { SSE_HEADERS, isRecord, keyRing, probeStatus, randomId, sendJson, startFake } from './http-fake.ts';
import { anthropicToolProblem } from './tool-history.ts';
import type { FinishReason, ResolvedScript, StreamControl, StreamWriter } from './stream-script.ts';
import { createStreamControl, playScript } from './stream-script.ts';

export interface AnthropicFakeOptions {
  models?: string[];
  /** Upper bound on the page size whatever `limit` asks, so tests reach `has_more`. */
  pageSize?: number;
}

export interface AnthropicFake extends FakeServer, KeyRing, Omit<StreamControl, 'take' | 'track'> {
  /** Base URL including `/v1`. */
  url: string;
  /** Bare origin, e.g. `http://127.0.0.1:40123`. */
  origin: string;
  setProbe(b: ProbeBehaviour): void;
  setModels(models: string[]): void;
}

const DEFAULT_MODELS = ['claude-sonnet-4-5-20250929', 'claude-haiku-4-5-20251001', 'claude-opus-4-1-20250805', 'claude-3-5-haiku-20241022'];

const ERRORS: Record<number, [type: string, message: string]> = {
  400: ['invalid_request_error', 'Invalid request'],
  401: ['authentication_error', 'invalid x-api-key'],
  403: ['permission_error', 'Your API key does not have permission to use the specified resource.'],
  404: ['not_found_error', 'Not found'],
  413: ['request_too_large', 'Request exceeds the maximum allowed number of bytes.'],
  429: ['rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit.'],
  500: ['api_error', 'Internal server error'],
  529: ['overloaded_error', 'Overloaded'],
};

const STOP_REASON: Record<FinishReason, string> = { stop: 'end_turn', length: 'max_tokens', content_filter: 'refusal', tool_calls: 'tool_use' };

function errorBody(status: number, message?: string): [unknown, Record<string, string>] {
  const [type, text] = ERRORS[status] ?? ['api_error', 'Internal server error'];
  const requestId = randomId('req_');
  const headers: Record<string, string> = { 'request-id': requestId };
  if (status === 429) headers['retry-after'] = '1';
  if (status === 401 || status === 403) headers['x-should-retry'] = 'false';
  return [{ type: 'error', error: { type, message: message ?? text }, request_id: requestId }, headers];
}

export async function startAnthropicFake(opts: AnthropicFakeOptions = {}): Promise<AnthropicFake> {
  const keys = keyRing('sk-ant-valid-anthropic');
  let models = opts.models ?? DEFAULT_MODELS;
  let probe: ProbeBehaviour = 'ok';
  const lifetime = new AbortController();
  const control = createStreamControl(lifetime.signal);

  const fail = (res: ServerResponse, status: number, message?: string): void => {
    const [body, headers] = errorBody(status, message);
    sendJson(res, status, body, headers);
  };
  /** Anthropic checks the key, then the version header; true when the request was answered. */
  const rejectHeaders = (req: RecordedRequest, res: ServerResponse): boolean => {
    const key = req.headers['x-api-key'];
    if (key === undefined) {
      fail(res, 401, 'x-api-key header is required');
      return true;
    }
    if (!keys.isValid(key)) {
      fail(res, 401);
      return true;
    }
    if (req.headers['anthropic-version'] === undefined) {
      fail(res, 400, 'anthropic-version: header is required');
      return true;
    }
    return false;
  };

  const fake = await startFake(async (req, res) => {
    const route = `${req.method} ${req.path}`;
    if (route === 'GET /v1/models') {
      if (probe === 'stall') return;
      const forced = probeStatus(probe, 500);
      if (forced !== undefined) return fail(res, forced);
      if (rejectHeaders(req, res)) return;
      return listModels(req, res);
    }
    if (route === 'POST /v1/messages') return messages(req, res);
    return fail(res, 404, `Not found: ${route}`);
  });
  fake.signal.addEventListener('abort', () => lifetime.abort());

  function listModels(req: RecordedRequest, res: ServerResponse): void {
    const limit = req.query['limit'] === undefined ? 20 : Number(req.query['limit']);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return fail(res, 400, 'limit: Input should be between 1 and 1000');
    const size = Math.min(limit, opts.pageSize ?? limit);
    const after = req.query['after_id'];
    const before = req.query['before_id'];
    const cursor = after ?? before;
    const at = cursor === undefined ? -1 : models.indexOf(cursor);
    if (cursor !== undefined && at < 0) return fail(res, 400, `Invalid cursor: ${cursor}`);
    const start = before !== undefined ? Math.max(0, at - size) : at + 1;
    const end = before !== undefined ? at : start + size;
    const page = models.slice(start, end);
    const created = Date.UTC(2025, 0, 1);
    sendJson(res, 200, {
      data: page.map((id, i) => ({
        type: 'model',
        id,
        display_name: id.replace(/^claude-/, 'Claude ').replace(/-\d{8}$/, ''),
        // Newest first, as the real list is ordered.
        created_at: new Date(created - (start + i) * 86_400_000).toISOString(),
      })),
      has_more: before !== undefined ? start > 0 : end < models.length,
      first_id: page[0] ?? null,
      last_id: page.at(-1) ?? null,
    });
  }

  async function messages(req: RecordedRequest, res: ServerResponse): Promise<void> {
    const body = isRecord(req.json) ? req.json : undefined;
    const streaming = body?.['stream'] === true;
    const tracked = streaming ? control.track(req, res) : undefined;
    if (rejectHeaders(req, res)) return;
    if (body === undefined) return fail(res, 400, 'Request body must be a JSON object');
    const model = body['model'];
    if (typeof model !== 'string') return fail(res, 400, 'model: Field required');
    if (typeof body['max_tokens'] !== 'number') return fail(res, 400, 'max_tokens: Field required');
    if (!Array.isArray(body['messages']) || body['messages'].length === 0) return fail(res, 400, 'messages: Field required');
    const toolProblem = anthropicToolProblem(body['messages'], Array.isArray(body['tools']) && body['tools'].length > 0);
    if (toolProblem !== undefined) return fail(res, 400, toolProblem);
    const script = control.take();
    if (script.status !== undefined) return fail(res, script.status);
    if (tracked === undefined) return sendJson(res, 200, message(model, script, true));
    await playScript(script, res, tracked, eventWriter(res, model, script), fake.signal);
  }

  return {
    ...fake,
    ...keys,
    url: `${fake.url}/v1`,
    origin: fake.url,
    streams: control.streams,
    scriptStream: control.scriptStream,
    enqueueStream: control.enqueueStream,
    clearQueue: control.clearQueue,
    setProbe: (b) => void (probe = b),
    setModels: (m) => void (models = [...m]),
  };
}

/** Anthropic reports cache reads and writes apart from `input_tokens`; thinking is inside `output_tokens`. */
function anthropicUsage(script: ResolvedScript, complete: boolean): Record<string, unknown> {
  const { input, output, cached = 0, cacheWrite = 0 } = script.usage;
  return {
    input_tokens: input - cached - cacheWrite,
    cache_creation_input_tokens: cacheWrite,
    cache_read_input_tokens: cached,
    output_tokens: complete ? output : 1,
    service_tier: 'standard',
  };
}

function message(model: string, script: ResolvedScript, complete: boolean): Record<string, unknown> {
  return {
    id: randomId('msg_'),
    type: 'message',
    role: 'assistant',
    model,
    content: complete ? [{ type: 'text', text: script.chunks.join('') }] : [],
    stop_reason: complete ? STOP_REASON[script.finishReason] : null,
    stop_sequence: null,
    usage: anthropicUsage(script, complete),
  };
}

function eventWriter(res: ServerResponse, model: string, script: ResolvedScript): StreamWriter {
  const event = (type: string, data: Record<string, unknown>): void => void res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  return {
    open() {
      res.writeHead(200, { ...SSE_HEADERS, 'request-id': randomId('req_') });
      event('message_start', { message: message(model, script, false) });
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      event('ping', {});
    },
    piece: (text) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
    calls(calls) {
      event('content_block_stop', { index: 0 });
      calls.forEach((c, i) => {
        const index = i + 1;
        event('content_block_start', { index, content_block: { type: 'tool_use', id: c.id ?? randomId('toolu_01', 22), name: c.name, input: {} } });
        for (const p of ['', ...c.pieces]) event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: p } });
        event('content_block_stop', { index });
      });
    },
    finish() {
      if (script.calls.length === 0) event('content_block_stop', { index: 0 });
      event('message_delta', {
        delta: { stop_reason: STOP_REASON[script.finishReason], stop_sequence: null },
        usage: { output_tokens: script.usage.output },
      });
      event('message_stop', {});
    },
    error: () => event('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }),
    malformed: () => void res.write('event: content_block_delta\ndata: {not json\n\n'),
  };
}
