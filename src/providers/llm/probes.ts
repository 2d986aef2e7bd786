// Key verification probes for the language-model providers (DESIGN §6): each speaks the provider's
// own model-listing protocol and reads its own way of refusing a key.
import type { Provider } from '../../catalogue.ts';
import { isRecord, probeGet, transientStatus, type ProbeAnswer, type ProbeCall, type ProbeFailure, type ProbeOptions, withProbeCall } from './probe-http.ts';

export type { ProbeOptions } from './probe-http.ts';

export type ProviderProbeResult =
  /** `models` is undefined when the key was accepted but the full model list could not be read. */
  | { readonly outcome: 'valid'; readonly models: readonly string[] | undefined }
  | { readonly outcome: 'invalid'; readonly status: number }
  | { readonly outcome: 'transient'; readonly reason: ProbeFailure };

const ANTHROPIC_VERSION = '2023-06-01';
// Both providers cap a page at 1000; the page limit only guards against a cursor that never ends.
const PAGE_SIZE = 1000;
const MAX_PAGES = 20;

export async function probeProviderKey(provider: Provider, apiKey: string, opts: ProbeOptions): Promise<ProviderProbeResult> {
  return withProbeCall(opts, (call) => {
    switch (provider) {
      case 'anthropic':
        return probeAnthropic(apiKey, opts.baseUrl, call);
      case 'google':
        return probeGemini(apiKey, opts.baseUrl, call);
      case 'openrouter':
        return probeOpenRouter(apiKey, opts.baseUrl, call);
      case 'openai':
      case 'mistral':
      case 'xai':
      case 'groq':
      case 'deepseek':
        return probeOpenAiStyle(provider, apiKey, opts.baseUrl, call);
    }
  });
}

/**
 * 401/403 are refusals everywhere. Google and xAI refuse a bad key with 400 and their own body;
 * any other 400 (a proxy's, a changed API's) says nothing about the key, so it reads as transient.
 */
function refusal(provider: Provider, status: number, body: unknown): boolean {
  if (status === 401 || status === 403) return true;
  if (status !== 400) return false;
  if (provider === 'google') return googleReason(body) === 'API_KEY_INVALID';
  if (provider === 'xai') return isRecord(body) && typeof body['error'] === 'string' && /incorrect api key/i.test(body['error']);
  return false;
}

function googleReason(body: unknown): string | undefined {
  const error = isRecord(body) ? body['error'] : undefined;
  const details = isRecord(error) && Array.isArray(error['details']) ? error['details'] : [];
  for (const d of details) if (isRecord(d) && typeof d['reason'] === 'string') return d['reason'];
  return undefined;
}

/** Not a success: a refusal or a transient failure. */
function failure(provider: Provider, answer: ProbeAnswer): ProviderProbeResult {
  if (answer.kind === 'failed') return { outcome: 'transient', reason: answer.reason };
  if (refusal(provider, answer.status, answer.body)) return { outcome: 'invalid', status: answer.status };
  return { outcome: 'transient', reason: transientStatus(answer.status) };
}

const ok = (a: ProbeAnswer): a is ProbeAnswer & { kind: 'answer' } => a.kind === 'answer' && a.status >= 200 && a.status < 300;
const unique = (ids: string[]): string[] => [...new Set(ids)];

/** OpenAI, Mistral, xAI, Groq, DeepSeek: `GET /models` with a bearer key, `{ data: [{ id }] }`. */
async function probeOpenAiStyle(provider: Provider, apiKey: string, base: string, call: ProbeCall): Promise<ProviderProbeResult> {
  const answer = await probeGet(new URL(`${base}/models`), { authorization: `Bearer ${apiKey}` }, call);
  if (!ok(answer)) return failure(provider, answer);
  const models = openAiModelIds(answer.body);
  // A 2xx that is not a model list is not a provider's answer (a portal, a wrong base URL).
  return models === undefined ? { outcome: 'transient', reason: 'unexpected' } : { outcome: 'valid', models };
}

function openAiModelIds(body: unknown): string[] | undefined {
  if (!isRecord(body) || !Array.isArray(body['data'])) return undefined;
  const ids: string[] = [];
  for (const m of body['data']) {
    if (!isRecord(m) || typeof m['id'] !== 'string') continue;
    // Mistral marks what cannot chat (embeddings, moderation).
    const caps = m['capabilities'];
    if (isRecord(caps) && caps['completion_chat'] === false) continue;
    ids.push(m['id']);
  }
  return unique(ids);
}

/** Anthropic: `x-api-key` + `anthropic-version`, cursor pages via `has_more` / `after_id`. */
async function probeAnthropic(apiKey: string, base: string, call: ProbeCall): Promise<ProviderProbeResult> {
  const headers = { 'x-api-key': apiKey, 'anthropic-version': ANTHROPIC_VERSION };
  const ids: string[] = [];
  let after: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = new URL(`${base}/models`);
    url.searchParams.set('limit', String(PAGE_SIZE));
    if (after !== undefined) url.searchParams.set('after_id', after);
    const answer = await probeGet(url, headers, call);
    const body = ok(answer) && isRecord(answer.body) && Array.isArray(answer.body['data']) ? answer.body : undefined;
    if (body === undefined) {
      if (page === 0) return ok(answer) ? { outcome: 'transient', reason: 'unexpected' } : failure('anthropic', answer);
      // The key was already accepted; only the list is incomplete.
      return { outcome: 'valid', models: undefined };
    }
    for (const m of body['data'] as unknown[]) if (isRecord(m) && typeof m['id'] === 'string') ids.push(m['id']);
    const last = body['last_id'];
    if (body['has_more'] !== true) return { outcome: 'valid', models: unique(ids) };
    if (typeof last !== 'string' || last === after) return { outcome: 'valid', models: undefined };
    after = last;
  }
  return { outcome: 'valid', models: undefined };
}

/** Gemini: `x-goog-api-key`, `pageToken` / `nextPageToken`, names `models/<id>`; chat models only. */
async function probeGemini(apiKey: string, base: string, call: ProbeCall): Promise<ProviderProbeResult> {
  const ids: string[] = [];
  let token: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = new URL(`${base}/models`);
    url.searchParams.set('pageSize', String(PAGE_SIZE));
    if (token !== undefined) url.searchParams.set('pageToken', token);
    const answer = await probeGet(url, { 'x-goog-api-key': apiKey }, call);
    const body = ok(answer) && isRecord(answer.body) ? answer.body : undefined;
    if (body === undefined) {
      if (page === 0) return ok(answer) ? { outcome: 'transient', reason: 'unexpected' } : failure('google', answer);
      return { outcome: 'valid', models: undefined };
    }
    // An empty list comes back as `{}`.
    const models = Array.isArray(body['models']) ? body['models'] : [];
    for (const m of models) {
      if (!isRecord(m) || typeof m['name'] !== 'string') continue;
      const methods = m['supportedGenerationMethods'];
      if (Array.isArray(methods) && !methods.includes('generateContent')) continue;
      ids.push(m['name'].replace(/^models\//, ''));
    }
    const next = body['nextPageToken'];
    if (typeof next !== 'string' || next === '') return { outcome: 'valid', models: unique(ids) };
    if (next === token) return { outcome: 'valid', models: undefined };
    token = next;
  }
  return { outcome: 'valid', models: undefined };
}

/**
 * OpenRouter: the model list is public, so it proves nothing about a key; `GET /key` does. The
 * list is then read without the key; if that fails the key is still verified.
 */
async function probeOpenRouter(apiKey: string, base: string, call: ProbeCall): Promise<ProviderProbeResult> {
  const answer = await probeGet(new URL(`${base}/key`), { authorization: `Bearer ${apiKey}` }, call);
  if (!ok(answer)) return failure('openrouter', answer);
  if (!isRecord(answer.body) || !isRecord(answer.body['data'])) return { outcome: 'transient', reason: 'unexpected' };
  const list = await probeGet(new URL(`${base}/models`), {}, call);
  return { outcome: 'valid', models: ok(list) ? openAiModelIds(list.body) : undefined };
}
