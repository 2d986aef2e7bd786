// The typed API client: openapi-fetch over the types generated from the service's own /openapi.json
// (scripts/build-web.ts), so a contract change breaks the client's build.
import createClient from 'openapi-fetch';
import type { components, paths } from './schema';
import { session, signOut } from '../session.ts';

export type Schemas = components['schemas'];

/**
 * Every call of the page to the service: with the session's token, and a 401 (an expired or revoked
 * token) signs out — back to sign-in rather than a page of failures. The typed client goes through it,
 * and so do the calls it cannot make (a reply read as it streams, an attachment read as a blob).
 */
export async function authorizedFetch(input: RequestInfo, init?: RequestInit): Promise<Response> {
  const request = new Request(input, init);
  const s = session();
  if (s) request.headers.set('authorization', `Bearer ${s.token}`);
  const response = await fetch(request);
  if (response.status === 401) signOut();
  return response;
}

export const api = createClient<paths>({ baseUrl: location.origin, fetch: (request) => authorizedFetch(request) });

/** A refusal of the service, with its documented code (DESIGN §3). */
export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly retryAfterSeconds: number | undefined;
  readonly requestId: string | undefined;
  readonly details: { path: string; message: string }[];

  constructor(status: number, body: unknown, retryAfter: string | null) {
    const e = (body as Partial<Schemas['ErrorEnvelope']> | undefined)?.error;
    super(e?.message ?? `request failed (HTTP ${status})`);
    this.status = status;
    this.code = e?.code ?? (status >= 500 ? 'INTERNAL' : 'UNKNOWN');
    this.requestId = e?.requestId;
    this.details = e?.details ?? [];
    const seconds = retryAfter === null ? NaN : Number(retryAfter);
    this.retryAfterSeconds = Number.isFinite(seconds) ? seconds : undefined;
  }
}

export async function errorOf(response: Response): Promise<ApiError> {
  const body: unknown = await response.json().catch(() => undefined);
  return new ApiError(response.status, body, response.headers.get('retry-after'));
}

/** Unwraps an openapi-fetch result: the data, or the service's refusal thrown as an ApiError. */
export async function must<T>(pending: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await pending;
  if (error !== undefined || !response.ok) throw new ApiError(response.status, error, response.headers.get('retry-after'));
  return data as T;
}

const WORDS: Partial<Record<string, string>> = {
  UNAUTHENTICATED: 'Your session has ended. Sign in again.',
  PROVIDER_KEY_INVALID: 'The provider refused this key. Check that it is copied whole and still active.',
  MARKET_DATA_KEY_INVALID: 'The market-data provider refused this key. Check that it is copied whole and still active.',
  PROVIDER_UNAVAILABLE: 'The provider could not be reached to verify the key. Try again in a moment; nothing was saved.',
  UPSTREAM_TIMEOUT: 'The provider took too long to answer. Try again; nothing was saved.',
  PROVIDER_KEY_NOT_CONFIGURED: 'Add a language-model key (Keys page) and make it active before you talk to the advisor.',
  PROVIDER_KEY_DECRYPTION_FAILED: 'Your stored key can no longer be read. Save it again on the Keys page.',
  STREAM_IN_PROGRESS: 'A reply is still being written. Wait for it or stop it first.',
  CLIENT_MESSAGE_ID_REUSED: 'This message was already sent with different text. Send it again.',
  IMAGE_INVALID: 'An image could not be read, or its bytes are not the format it claims. Use a PNG, JPEG or WebP file.',
  IMAGE_TOO_LARGE: 'An image is too large.',
  IMAGES_NOT_SUPPORTED: "This conversation's model does not take images. Send text only, or start a conversation with a model that does.",
  TIER_LIMIT_IMAGES: "You have used this month's image allowance. Text-only messages still work.",
  PAYLOAD_TOO_LARGE: 'The message with its images is too large.',
  INSUFFICIENT_CREDITS: 'You are out of credits for this model. Buy credits, or switch to a model paid with free allowance turns.',
  ALLOWANCE_EXHAUSTED: "This month's free turns are used up. Buy credits and use a credits model, or wait for the allowance to reset.",
  INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE: 'This model is paid with credits and you have none, but you still have free turns: switch to an allowance model.',
  MODEL_NOT_AVAILABLE: "Your active key's default model is not offered here. Choose another default model on the Keys page.",
  BILLING_NOT_AVAILABLE: 'Billing is not available right now, so no turn can be paid. Try again shortly.',
  UNKNOWN_PACK: 'That credit pack is no longer on sale. Reload the page.',
  PAYMENT_PROVIDER_ERROR: 'The payment provider did not answer. Nothing was charged; try again.',
  ACCOUNT_NAME_TAKEN: 'You already have an account with that name.',
  SERVICE_UNAVAILABLE: 'The service is busy or restarting. Try again in a few seconds.',
};

/** A refusal in words a trader can act on (the code decides, never the message). */
export function explain(err: unknown): string {
  if (!(err instanceof ApiError)) return err instanceof Error ? `Something went wrong: ${err.message}` : 'Something went wrong.';
  if (err.code === 'RATE_LIMITED') {
    const wait = err.retryAfterSeconds;
    return `Too many requests. Try again in ${wait === undefined ? 'a moment' : `${wait} second${wait === 1 ? '' : 's'}`}.`;
  }
  if (err.code === 'VALIDATION_ERROR') return `Please check the form: ${err.details[0]?.message ?? err.message}.`;
  return WORDS[err.code] ?? err.message;
}

const STREAM_WORDS: Partial<Record<string, string>> = {
  PROVIDER_AUTH_FAILED: 'The provider refused your key during this reply. Save a new key on the Keys page.',
  PROVIDER_RATE_LIMITED: 'The provider is rate-limiting your key. Wait a little and send again.',
  PROVIDER_UNAVAILABLE: 'The provider is unavailable. Send again in a moment.',
  PROVIDER_ERROR: 'The provider failed while writing this reply. Send again.',
  UPSTREAM_TIMEOUT: 'The provider stopped answering. Send again.',
  SHUTTING_DOWN: 'The service restarted during this reply. Send again.',
};

/** A reply that ended in an `error` frame (DESIGN §7), in words. */
export function explainStreamError(code: string, message: string): string {
  return STREAM_WORDS[code] ?? (message || 'The reply failed.');
}
