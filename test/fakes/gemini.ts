// Fake of Google's Gemini API (generativelanguage v1beta): key in x-goog-api-key or ?key=,
// page-token model list, Google-style error bodies (a bad key is a 400), and
// streamGenerateContent?alt=sse where every chunk carries usage and the last one the finishReason.
import type { ServerResponse } from 'node:http';
import type { FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
import { isRecord, keyRing, probeStatus, randomId, sendJson, startFake } from './http-fake.ts';
import { geminiToolProblem } from './tool-history.ts';
import type { FinishReason, ResolvedScript, StreamControl, StreamWriter } from './stream-script.ts';
import { createStreamControl, playScript, runningOutput } from './stream-script.ts';

export interface GeminiFakeOptions {
  models?: string[];
  /** Upper bound on the page size whatever `pageSize` asks, so tests reach `nextPageToken`. */
  pageSize?: number;
  /** SSE line ending. Google's endpoint separates events with CRLF; '\n' to test the simple case. */
  lineEnding?: '\r\n' | '\n';
}

export interface GeminiFake extends FakeServer, KeyRing, Omit<StreamControl, 'take' | 'track'> {
  /** Base URL including `/v1beta`. */
  url: string;
  /** Bare origin, e.g. `http://127.0.0.1:40123`. */
  origin: string;
  setProbe(b: ProbeBehaviour): void;
  setModels(models: string[]): void;
}

const DEFAULT_MODELS = ['gemini-2.5-flash', 'gemini-2.5-pro', 'gemini-2.0-flash', 'text-embedding-004'];

const ERRORS: Record<number, [status: string, message: string]> = {
  400: ['INVALID_ARGUMENT', 'Request contains an invalid argument.'],
  403: ['PERMISSION_DENIED', 'The caller does not have permission'],
  404: ['NOT_FOUND', 'Requested entity was not found.'],
  429: ['RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).'],
  500: ['INTERNAL', 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting'],
  503: ['UNAVAILABLE', 'The model is overloaded. Please try again later.'],
};

const BAD_KEY = {
  error: {
    code: 400,
    message: 'API key not valid. Please pass a valid API key.',
    status: 'INVALID_ARGUMENT',
    details: [
      {
        '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
        reason: 'API_KEY_INVALID',
        domain: 'googleapis.com',
        metadata: { service: 'generativelanguage.googleapis.com' },
      },
    ],
  },
};

const FINISH: Record<FinishReason, string> = { stop: 'STOP', length: 'MAX_TOKENS', content_filter: 'SAFETY', tool_calls: 'STOP' };

function googleError(status: number, message?: string): unknown {
  const [code, text] = ERRORS[status] ?? ['UNKNOWN', 'Unknown error'];
  return { error: { code: status, message: message ?? text, status: code } };
}

export async function startGeminiFake(opts: GeminiFakeOptions = {}): Promise<GeminiFake> {
  const keys = keyRing('AIza-valid-gemini');
  let models = opts.models ?? DEFAULT_MODELS;
  let probe: ProbeBehaviour = 'ok';
  const lifetime = new AbortController();
  const control = createStreamControl(lifetime.signal);
  const eol = opts.lineEnding ?? '\r\n';

  const fail = (res: ServerResponse, status: number, message?: string): void =>
    sendJson(res, status, status === 400 && message === undefined ? BAD_KEY : googleError(status, message), status === 429 ? { 'retry-after': '1' } : {});
  const rejectKey = (req: RecordedRequest, res: ServerResponse): boolean => {
    const key = req.headers['x-goog-api-key'] ?? req.query['key'];
    if (keys.isValid(key)) return false;
    if (key === undefined) {
      fail(
        res,
        403,
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
      );
    } else {
      sendJson(res, 400, BAD_KEY);
    }
    return true;
  };

  const fake = await startFake(async (req, res) => {
    if (req.method === 'GET' && req.path === '/v1beta/models') {
      if (probe === 'stall') return;
      const forced = probeStatus(probe, 503);
      if (forced !== undefined) return fail(res, forced);
      if (rejectKey(req, res)) return;
      return listModels(req, res);
    }
    const m = /^\/v1beta\/models\/([^/:]+):(streamGenerateContent|generateContent)$/.exec(req.path);
    if (req.method === 'POST' && m !== null) return generate(req, res, decodeURIComponent(m[1] ?? ''), m[2] === 'streamGenerateContent');
    return fail(res, 404, `Not found: ${req.method} ${req.path}`);
  });
  fake.signal.addEventListener('abort', () => lifetime.abort());

  function listModels(req: RecordedRequest, res: ServerResponse): void {
    const asked = req.query['pageSize'] === undefined ? 50 : Number(req.query['pageSize']);
    if (!Number.isInteger(asked) || asked < 0) return fail(res, 400, 'Invalid page size');
    const size = Math.min(asked === 0 ? 50 : asked, 1000, opts.pageSize ?? 1000);
    const token = req.query['pageToken'];
    const start = token === undefined || token === '' ? 0 : decodeToken(token);
    if (start === undefined) return fail(res, 400, 'Invalid page token.');
    const end = start + size;
    sendJson(res, 200, {
      models: models.slice(start, end).map(modelEntry),
      ...(end < models.length ? { nextPageToken: encodeToken(end) } : {}),
    });
  }

  async function generate(req: RecordedRequest, res: ServerResponse, model: string, streaming: boolean): Promise<void> {
    const sse = streaming && req.query['alt'] === 'sse';
    const tracked = sse ? control.track(req, res) : undefined;
    if (rejectKey(req, res)) return;
    const body = isRecord(req.json) ? req.json : {};
    if (!Array.isArray(body['contents']) || body['contents'].length === 0) {
      return fail(res, 400, '* GenerateContentRequest.contents: contents is not specified\n');
    }
    const toolProblem = geminiToolProblem(body['contents']);
    if (toolProblem !== undefined) return fail(res, 400, toolProblem);
    const script = control.take();
    if (script.status !== undefined) return fail(res, script.status, script.status === 400 ? 'Request contains an invalid argument.' : undefined);
    const n = script.chunks.length;
    if (tracked === undefined) {
      const whole = chunkBody(model, script, streaming ? 0 : -1, script.chunks.join(''), true);
      if (!streaming) return sendJson(res, 200, whole);
      // Without alt=sse the stream is one JSON array; sending it whole is enough for a fake.
      const all = script.chunks.map((t, i) => chunkBody(model, script, i, t, i === n - 1));
      return sendJson(res, 200, all.length > 0 ? all : [whole]);
    }
    await playScript(script, res, tracked, sseWriter(res, model, script, eol), fake.signal);
  }

  return {
    ...fake,
    ...keys,
    url: `${fake.url}/v1beta`,
    origin: fake.url,
    streams: control.streams,
    scriptStream: control.scriptStream,
    enqueueStream: control.enqueueStream,
    clearQueue: control.clearQueue,
    setProbe: (b) => void (probe = b),
    setModels: (list) => void (models = [...list]),
  };
}

const encodeToken = (offset: number): string => Buffer.from(`offset:${offset}`).toString('base64url');

function decodeToken(token: string): number | undefined {
  const m = /^offset:(\d+)$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  return m === null ? undefined : Number(m[1]);
}

function modelEntry(id: string): Record<string, unknown> {
  const embedding = id.includes('embedding');
  return {
    name: `models/${id}`,
    version: '001',
    displayName: id.replace(/^gemini-/, 'Gemini ').replace(/-/g, ' '),
    description: `Fake ${id}`,
    inputTokenLimit: embedding ? 2048 : 1048576,
    outputTokenLimit: embedding ? 1 : 65536,
    supportedGenerationMethods: embedding ? ['embedContent'] : ['generateContent', 'countTokens', 'createCachedContent', 'batchGenerateContent'],
    ...(embedding ? {} : { temperature: 1, topP: 0.95, topK: 64, maxTemperature: 2 }),
  };
}

/**
 * Gemini reports thinking apart from `candidatesTokenCount` (`thoughtsTokenCount`) and context-cache
 * reads inside `promptTokenCount` (`cachedContentTokenCount`); either field is absent when zero.
 */
function geminiUsage(script: ResolvedScript, output: number): Record<string, unknown> {
  const { input, cached, reasoning } = script.usage;
  const thoughts = Math.min(reasoning ?? 0, output);
  return {
    promptTokenCount: input,
    candidatesTokenCount: output - thoughts,
    totalTokenCount: input + output,
    ...(cached ? { cachedContentTokenCount: cached } : {}),
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: input }],
  };
}

/** One response chunk; index -1 means the whole (non-streamed) answer. */
function chunkBody(model: string, script: ResolvedScript, i: number, text: string, last: boolean): Record<string, unknown> {
  const output = i < 0 || last ? script.usage.output : runningOutput(script, i);
  const finish = FINISH[script.finishReason];
  const candidate: Record<string, unknown> = { content: { parts: [{ text }], role: 'model' }, index: 0 };
  if (last) candidate['finishReason'] = finish;
  if (last && finish === 'SAFETY') {
    candidate['safetyRatings'] = [{ category: 'HARM_CATEGORY_DANGEROUS_CONTENT', probability: 'HIGH', blocked: true }];
  }
  return {
    candidates: [candidate],
    usageMetadata: geminiUsage(script, output),
    modelVersion: model,
    responseId: randomId('', 10),
  };
}

function sseWriter(res: ServerResponse, model: string, script: ResolvedScript, eol: string): StreamWriter {
  const n = script.chunks.length;
  // The finishReason rides on the last text chunk, unless the script breaks the stream first.
  const interrupted = [script.errorAfterChunks, script.dropAfterChunks, script.stallAfterChunks, script.malformedAfterChunks].some(
    (v) => v !== undefined && v <= n,
  );
  const data = (o: unknown): void => void res.write(`data: ${JSON.stringify(o)}${eol}${eol}`);
  return {
    open: () => res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-goog-request-id': randomId('') }),
    piece: (text, i) => data(chunkBody(model, script, i, text, i === n - 1 && !interrupted && script.calls.length === 0)),
    calls(calls) {
      // Function calls arrive whole, args as an object, with the thought signature of a thinking model.
      const parts = calls.map((c, i) => ({
        functionCall: { ...(c.id === undefined ? {} : { id: c.id }), name: c.name, args: JSON.parse(c.text) as unknown },
        ...(i === 0 ? { thoughtSignature: Buffer.from(`sig:${c.name}`).toString('base64') } : {}),
      }));
      const body = chunkBody(model, script, n, '', true);
      const candidates = body['candidates'] as Record<string, unknown>[];
      if (candidates[0]) candidates[0]['content'] = { parts, role: 'model' };
      data(body);
    },
    finish() {
      if (n === 0 && script.calls.length === 0) data(chunkBody(model, script, 0, '', true));
    },
    error: () => data(googleError(500)),
    malformed: () => void res.write(`data: {not json${eol}${eol}`),
  };
}
