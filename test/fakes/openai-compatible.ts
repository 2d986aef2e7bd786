// Fake of the OpenAI-style chat providers (OpenAI, Mistral, xAI, Groq, DeepSeek, OpenRouter). They
// share the wire format but differ in how they reject a key, shape errors and report usage.
import type { ServerResponse } from 'node:http';
import type { FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
import { SSE_HEADERS, bearer, isRecord, keyRing, maskKey, probeStatus, randomId, sendJson, startFake } from './http-fake.ts';
import { openAiToolProblem } from './tool-history.ts';
import type { ResolvedScript, StreamControl, StreamWriter } from './stream-script.ts';
import { createStreamControl, playScript } from './stream-script.ts';

export type OpenAiFlavor = 'openai' | 'mistral' | 'xai' | 'groq' | 'deepseek' | 'openrouter';

export interface OpenAiCompatibleFakeOptions {
  flavor: OpenAiFlavor;
  models?: string[];
}

export interface OpenAiCompatibleFake extends FakeServer, KeyRing, Omit<StreamControl, 'take' | 'track'> {
  /** Base URL including the version segment: `…/v1` (OpenRouter: `…/api/v1`). */
  url: string;
  /** Bare origin, e.g. `http://127.0.0.1:40123`. */
  origin: string;
  flavor: OpenAiFlavor;
  setProbe(b: ProbeBehaviour): void;
  setModels(models: string[]): void;
}

const DEFAULT_MODELS: Record<OpenAiFlavor, string[]> = {
  openai: ['gpt-4o-mini', 'gpt-4.1-mini', 'gpt-4o', 'text-embedding-3-small', 'dall-e-3'],
  mistral: ['mistral-small-latest', 'mistral-large-latest', 'pixtral-12b-2409', 'mistral-embed'],
  xai: ['grok-3-mini', 'grok-4', 'grok-2-vision-1212'],
  groq: ['llama-3.3-70b-versatile', 'llama-3.1-8b-instant', 'whisper-large-v3'],
  deepseek: ['deepseek-chat', 'deepseek-reasoner'],
  openrouter: ['openai/gpt-4o-mini', 'anthropic/claude-3.5-haiku', 'google/gemini-2.5-flash'],
};

const OWNER: Record<OpenAiFlavor, string> = {
  openai: 'system',
  mistral: 'mistralai',
  xai: 'xai',
  groq: 'Meta',
  deepseek: 'deepseek',
  openrouter: 'openrouter',
};

// xAI answers with gRPC-style status text in `code` and the message in `error`.
const XAI_CODES: Record<number, string> = {
  400: 'Client specified an invalid argument',
  401: 'Unauthenticated',
  403: 'The caller does not have permission to execute the specified operation',
  404: 'Some requested entity was not found',
  429: 'Some resource has been exhausted',
  500: 'Internal error',
  503: 'The service is currently unavailable',
};

const MESSAGES: Record<number, [message: string, type: string, code: string | null]> = {
  400: ['Incorrect API key provided.', 'invalid_request_error', 'invalid_api_key'],
  401: ['Unauthorized', 'invalid_request_error', 'invalid_api_key'],
  403: ['Country, region, or territory not supported', 'request_forbidden', 'unsupported_country_region_territory'],
  404: ['The model does not exist or you do not have access to it.', 'invalid_request_error', 'model_not_found'],
  429: ['Rate limit reached for requests', 'requests', 'rate_limit_exceeded'],
  500: ['The server had an error while processing your request. Sorry about that!', 'server_error', null],
  503: ['The engine is currently overloaded, please try again later.', 'server_error', null],
};

/** The provider's own answer to a missing or unknown key. */
function badKeyAnswer(flavor: OpenAiFlavor, key: string | undefined): [number, unknown] {
  const k = key ?? '';
  switch (flavor) {
    case 'xai':
      return [400, { code: XAI_CODES[400], error: `Incorrect API key provided: ${maskKey(k, 2, 2)}. You can obtain an API key from https://console.x.ai.` }];
    case 'mistral':
      return [401, { message: 'Unauthorized', request_id: randomId('', 16) }];
    case 'groq':
      return [401, { error: { message: 'Invalid API Key', type: 'invalid_request_error', code: 'invalid_api_key' } }];
    case 'deepseek':
      return [
        401,
        {
          error: {
            message: `Authentication Fails, Your api key: ****${k.slice(-4)} is invalid`,
            type: 'authentication_error',
            param: null,
            code: 'invalid_request_error',
          },
        },
      ];
    case 'openrouter':
      return [401, { error: { message: key === undefined ? 'No auth credentials found' : 'User not found.', code: 401 } }];
    case 'openai':
      return [
        401,
        {
          error: {
            message: `Incorrect API key provided: ${maskKey(k)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
            type: 'invalid_request_error',
            param: null,
            code: 'invalid_api_key',
          },
        },
      ];
  }
}

/** The provider's answer for a forced status (probe override or scripted stream status). */
function statusAnswer(flavor: OpenAiFlavor, status: number): [number, unknown, Record<string, string>] {
  const headers: Record<string, string> = status === 429 ? { 'retry-after': '1' } : {};
  if (status === 401 && flavor !== 'xai') return [401, badKeyAnswer(flavor, 'sk-forced-401')[1], headers];
  if (status === 400 && flavor === 'xai') return [400, badKeyAnswer(flavor, 'sk-forced-400')[1], headers];
  const [message, type, code] = MESSAGES[status] ?? ['Unexpected error', 'server_error', null];
  if (flavor === 'xai') return [status, { code: XAI_CODES[status] ?? 'Unknown', error: message }, headers];
  if (flavor === 'openrouter') return [status, { error: { message, code: status } }, headers];
  if (flavor === 'mistral') return [status, { object: 'error', message, type, param: null, code }, headers];
  return [status, { error: { message, type, param: null, code } }, headers];
}

export async function startOpenAiCompatibleFake(opts: OpenAiCompatibleFakeOptions): Promise<OpenAiCompatibleFake> {
  const { flavor } = opts;
  const prefix = flavor === 'openrouter' ? '/api/v1' : '/v1';
  const keys = keyRing(flavor === 'openrouter' ? 'sk-or-v1-valid-openrouter' : `sk-valid-${flavor}`);
  let models = opts.models ?? DEFAULT_MODELS[flavor];
  let probe: ProbeBehaviour = 'ok';
  const lifetime = new AbortController();
  const control = createStreamControl(lifetime.signal);

  const answer = (res: ServerResponse, status: number): void => {
    const [s, body, headers] = statusAnswer(flavor, status);
    sendJson(res, s, body, headers);
  };
  /** True when the probe override answered (or stalled) the request. */
  const probeOverride = (res: ServerResponse): boolean => {
    if (probe === 'stall') return true;
    const status = probeStatus(probe, 503);
    if (status === undefined) return false;
    answer(res, status);
    return true;
  };
  const rejectKey = (req: RecordedRequest, res: ServerResponse): boolean => {
    const key = bearer(req);
    if (keys.isValid(key)) return false;
    const [status, body] = badKeyAnswer(flavor, key);
    sendJson(res, status, body);
    return true;
  };

  const fake = await startFake(async (req, res) => {
    if (!req.path.startsWith(`${prefix}/`)) return sendJson(res, 404, { error: { message: 'Not found' } });
    const route = `${req.method} ${req.path.slice(prefix.length)}`;
    const created = 1_700_000_000;
    if (route === 'GET /models' && flavor === 'openrouter') {
      // OpenRouter's model list is public, so it is not the key probe.
      return sendJson(res, 200, { data: models.map((id) => openRouterModel(id, created)) });
    }
    if (route === 'GET /key' && flavor === 'openrouter') {
      if (probeOverride(res) || rejectKey(req, res)) return;
      const label = maskKey(bearer(req) ?? '', 11, 3);
      return sendJson(res, 200, {
        data: {
          label,
          limit: null,
          usage: 0.1015,
          is_free_tier: false,
          is_provisioning_key: false,
          limit_remaining: null,
          rate_limit: { requests: 50, interval: '10s' },
        },
      });
    }
    if (route === 'GET /models') {
      if (probeOverride(res) || rejectKey(req, res)) return;
      return sendJson(res, 200, { object: 'list', data: models.map((id) => modelEntry(flavor, id, created)) });
    }
    if (route === 'POST /chat/completions') return chat(req, res);
    return sendJson(res, 404, { error: { message: `Unknown route ${route}`, type: 'invalid_request_error', param: null, code: 'unknown_url' } });
  });
  fake.signal.addEventListener('abort', () => lifetime.abort());

  async function chat(req: RecordedRequest, res: ServerResponse): Promise<void> {
    const body = isRecord(req.json) ? req.json : {};
    const streaming = body['stream'] === true;
    const tracked = streaming ? control.track(req, res) : undefined;
    if (rejectKey(req, res)) return;
    const model = body['model'];
    const messages = body['messages'];
    if (typeof model !== 'string' || !Array.isArray(messages) || messages.length === 0) {
      const [s, b] = statusAnswer(flavor, 400);
      return sendJson(
        res,
        s,
        flavor === 'xai'
          ? b
          : { error: { message: 'you must provide a model parameter and a non-empty messages array', type: 'invalid_request_error', param: null, code: null } },
      );
    }
    const toolProblem = openAiToolProblem(messages, flavor === 'mistral');
    if (toolProblem !== undefined) {
      const [s, b] = statusAnswer(flavor, 400);
      return sendJson(res, s, flavor === 'xai' ? b : { error: { message: toolProblem, type: 'invalid_request_error', param: 'messages', code: null } });
    }
    const script = control.take();
    if (script.status !== undefined) return answer(res, script.status);
    const opts = isRecord(body['stream_options']) ? body['stream_options'] : {};
    const includeUsage = opts['include_usage'] === true;
    if (tracked === undefined) return sendJson(res, 200, completion(flavor, model, script));
    await playScript(script, res, tracked, chunkWriter(flavor, res, model, script, includeUsage), fake.signal);
  }

  return {
    ...fake,
    ...keys,
    url: `${fake.url}${prefix}`,
    origin: fake.url,
    flavor,
    streams: control.streams,
    scriptStream: control.scriptStream,
    enqueueStream: control.enqueueStream,
    clearQueue: control.clearQueue,
    setProbe: (b) => void (probe = b),
    setModels: (m) => void (models = [...m]),
  };
}

function modelEntry(flavor: OpenAiFlavor, id: string, created: number): Record<string, unknown> {
  const entry: Record<string, unknown> = { id, object: 'model', created, owned_by: OWNER[flavor] };
  if (flavor === 'mistral') entry['capabilities'] = { completion_chat: !id.includes('embed'), vision: id.startsWith('pixtral') };
  if (flavor === 'groq') Object.assign(entry, { active: true, context_window: 131072 });
  return entry;
}

function openRouterModel(id: string, created: number): Record<string, unknown> {
  return {
    id,
    canonical_slug: id,
    name: id,
    created,
    context_length: 128000,
    architecture: { modality: 'text+image->text', input_modalities: ['text', 'image'], output_modalities: ['text'] },
    pricing: { prompt: '0.00000015', completion: '0.0000006' },
    supported_parameters: ['max_tokens', 'temperature', 'stream_options'],
  };
}

/** The usage object as each flavour reports it (their documented fields; zeros where they always send the field). */
function usageOf(flavor: OpenAiFlavor, script: ResolvedScript): Record<string, unknown> {
  const { input, output, cached = 0, reasoning = 0 } = script.usage;
  const base = { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
  switch (flavor) {
    case 'openai':
      return {
        ...base,
        prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
      };
    case 'xai':
      return {
        ...base,
        prompt_tokens_details: { text_tokens: input, audio_tokens: 0, image_tokens: 0, cached_tokens: cached },
        completion_tokens_details: { reasoning_tokens: reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
        num_sources_used: 0,
      };
    case 'deepseek':
      // Cache hits and misses split the prompt; reasoning is reported by deepseek-reasoner.
      return {
        ...base,
        prompt_cache_hit_tokens: cached,
        prompt_cache_miss_tokens: input - cached,
        ...(script.usage.reasoning === undefined ? {} : { completion_tokens_details: { reasoning_tokens: reasoning } }),
      };
    case 'openrouter':
      return {
        ...base,
        prompt_tokens_details: { cached_tokens: cached },
        completion_tokens_details: { reasoning_tokens: reasoning },
        cost: script.usage.cost ?? 0.0001,
        is_byok: false,
      };
    case 'groq':
      return { queue_time: 0.01, ...base, prompt_time: 0.002, completion_time: 0.01, total_time: 0.012 };
    default:
      // Mistral: the three totals only.
      return base;
  }
}

function completion(flavor: OpenAiFlavor, model: string, script: ResolvedScript): unknown {
  return {
    id: randomId('chatcmpl-'),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: script.chunks.join(''), refusal: null }, logprobs: null, finish_reason: script.finishReason }],
    usage: usageOf(flavor, script),
  };
}

function chunkWriter(flavor: OpenAiFlavor, res: ServerResponse, model: string, script: ResolvedScript, includeUsage: boolean): StreamWriter {
  const id = randomId('chatcmpl-');
  const created = Math.floor(Date.now() / 1000);
  const data = (o: unknown): void => void res.write(`data: ${JSON.stringify(o)}\n\n`);
  const processing = (): void => {
    // OpenRouter keeps the connection alive with SSE comments while the upstream model works.
    if (flavor === 'openrouter') res.write(': OPENROUTER PROCESSING\n\n');
  };
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    ...(flavor === 'openrouter' ? { provider: 'OpenAI' } : { system_fingerprint: 'fp_fake' }),
    choices,
    ...(includeUsage && flavor !== 'mistral' ? { usage: null } : {}),
    ...extra,
  });
  const choice = (delta: unknown, finish: string | null = null): unknown => ({ index: 0, delta, logprobs: null, finish_reason: finish });
  return {
    open() {
      res.writeHead(200, { ...SSE_HEADERS, 'x-request-id': randomId('req_') });
      processing();
      data(chunk([choice({ role: 'assistant', content: '' })]));
    },
    piece: (text) => data(chunk([choice({ content: text })])),
    calls(calls) {
      // The first fragment of each call carries its index, id, type and name; the rest only arguments.
      calls.forEach((c, index) => {
        const id = c.id ?? (flavor === 'mistral' ? randomId('', 9) : randomId('call_', 12));
        if (flavor === 'mistral') {
          // Mistral sends each call whole, in one chunk.
          data(chunk([choice({ tool_calls: [{ id, type: 'function', function: { name: c.name, arguments: c.text }, index }] })]));
          return;
        }
        data(chunk([choice({ tool_calls: [{ index, id, type: 'function', function: { name: c.name, arguments: '' } }] })]));
        for (const p of c.pieces) data(chunk([choice({ tool_calls: [{ index, function: { arguments: p } }] })]));
      });
    },
    gap: processing,
    finish() {
      const usage = usageOf(flavor, script);
      // Mistral reports usage on the finishing chunk; Groq too, under `x_groq` (and again in the usage chunk when asked).
      const onFinish = flavor === 'mistral' ? { usage } : flavor === 'groq' ? { x_groq: { id: randomId('req_'), usage } } : {};
      data(chunk([choice({}, script.finishReason)], onFinish));
      if ((includeUsage || flavor === 'openrouter') && flavor !== 'mistral') data(chunk([], { usage }));
      res.write('data: [DONE]\n\n');
    },
    error() {
      if (flavor === 'openrouter') {
        data(chunk([choice({ content: '' }, 'error')], { error: { code: 'server_error', message: 'Provider disconnected unexpectedly' } }));
      } else {
        data({ error: { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', param: null, code: null } });
      }
    },
    malformed: () => void res.write('data: {not json\n\n'),
  };
}
