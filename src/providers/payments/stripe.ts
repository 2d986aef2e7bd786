import { isUtf8 } from 'node:buffer';
import { createHash, createHmac } from 'node:crypto';
import type Stripe from 'stripe';
import type { Config } from '../../config.ts';
import { unstorableTextAt } from '../../db/storable-text.ts';

interface CheckoutSessionInput {
  readonly purchaseId: string;
  readonly userId: string;
  readonly packId: string;
  readonly packName: string;
  readonly credits: number;
  /** Minor units of `currency`. */
  readonly amount: number;
  readonly currency: string;
  readonly successUrl: string;
  readonly cancelUrl: string;
}

interface CheckoutSession {
  readonly sessionId: string;
  readonly url: string;
}

/** The payment processor as the billing feature sees it. */
export interface PaymentsClient {
  /** Throws PaymentProviderError when the processor refuses or cannot be reached. */
  createCheckoutSession(input: CheckoutSessionInput): Promise<CheckoutSession>;
}

class PaymentProviderError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status: number | undefined) {
    super(message);
    this.name = 'PaymentProviderError';
    this.status = status;
  }
}

/** A verified webhook event, reduced to what the service reads. */
export interface PaymentEvent {
  readonly id: string;
  readonly type: string;
  readonly object: Record<string, unknown>;
}

export class WebhookSignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookSignatureError';
  }
}

export interface StripeClientOptions {
  readonly maxNetworkRetries?: number;
  readonly timeoutMs?: number;
}

/** Where stripe-node should connect: STRIPE_API_BASE (a fake, a proxy) or Stripe's public API. */
function connection(apiBase: string | undefined): { host?: string; port?: number; protocol?: 'http' | 'https' } {
  if (apiBase === undefined) return {};
  const u = new URL(apiBase);
  const protocol = u.protocol === 'http:' ? 'http' : 'https';
  return { host: u.hostname, port: u.port ? Number(u.port) : protocol === 'http' ? 80 : 443, protocol };
}

/**
 * stripe-node, loaded on first use: about 0.13 s of CPU to import beyond what the service loads anyway, which a service with
 * no payment processor configured (and every process that never takes a payment) need not pay. A
 * configured client starts loading it at once, so no checkout or webhook waits for it.
 */
let sdk: Promise<typeof Stripe> | undefined;
const stripeSdk = (): Promise<typeof Stripe> => (sdk ??= import('stripe').then((m) => m.default));

/** A Stripe-backed client, or undefined when no secret key is configured (billing not available). */
export function createStripePayments(stripe: Config['stripe'], opts: StripeClientOptions = {}): PaymentsClient | undefined {
  const secretKey = stripe.secretKey;
  if (secretKey === undefined) return undefined;
  const client = stripeSdk().then(
    (StripeSdk) =>
      new StripeSdk(secretKey, {
        ...connection(stripe.apiBase),
        maxNetworkRetries: opts.maxNetworkRetries ?? 2,
        timeout: opts.timeoutMs ?? 30_000,
        telemetry: false,
      }),
  );
  return {
    async createCheckoutSession(input) {
      const StripeSdk = await stripeSdk();
      const metadata = { userId: input.userId, packId: input.packId, credits: String(input.credits), purchaseId: input.purchaseId };
      let session: Stripe.Checkout.Session;
      try {
        session = await (
          await client
        ).checkout.sessions.create(
          {
            mode: 'payment',
            line_items: [
              {
                quantity: 1,
                price_data: { currency: input.currency, unit_amount: input.amount, product_data: { name: input.packName } },
              },
            ],
            client_reference_id: input.userId,
            metadata,
            // Refund events carry the charge, whose payment intent holds this copy of the metadata.
            payment_intent_data: { metadata },
            success_url: input.successUrl,
            cancel_url: input.cancelUrl,
          },
          // One key per purchase: stripe-node's own retries can never open a second session.
          { idempotencyKey: `checkout-${input.purchaseId}` },
        );
      } catch (err) {
        const status = err instanceof StripeSdk.errors.StripeError ? err.statusCode : undefined;
        throw new PaymentProviderError(err instanceof Error ? err.message : 'payment provider failed', status);
      }
      if (typeof session.url !== 'string' || session.url === '') {
        throw new PaymentProviderError('checkout session has no URL', undefined);
      }
      return { sessionId: session.id, url: session.url };
    },
  };
}

/**
 * What a verified webhook body holds: an event the service reads, or bytes Stripe signed that are not
 * such an event (a thin v2 event notification, a shape this service does not know, text the store
 * cannot hold — DESIGN §10). The second is acknowledged, never refused: a refusal would have Stripe
 * retry it for days.
 */
export type VerifiedWebhook =
  | { readonly kind: 'event'; readonly event: PaymentEvent }
  | { readonly kind: 'unreadable'; readonly id: string | undefined; readonly type: string | undefined; readonly reason: string };

/**
 * stripe-node decodes a byte body as UTF-8 before it signs it again, so a byte that is not UTF-8
 * would be checked as U+FFFD, not as sent. Handed the body as latin1 text (one character per byte)
 * and signing latin1, its check covers exactly the bytes received, as Stripe signs them.
 */
const EXACT_BYTES: InstanceType<typeof Stripe.CryptoProvider> = {
  computeHMACSignature: (content, secret) => createHmac('sha256', secret).update(content, 'latin1').digest('hex'),
  computeHMACSignatureAsync: async (content, secret) => createHmac('sha256', secret).update(content, 'latin1').digest('hex'),
  computeSHA256Async: async (data) => new Uint8Array(createHash('sha256').update(data).digest()),
};

/**
 * Verifies `Stripe-Signature` over the exact bytes received (any re-serialisation breaks it), then
 * reads the event. `nowMs` comes from the service clock so the 300 s tolerance is testable.
 * Throws WebhookSignatureError only when the signature does not verify.
 */
export async function verifyStripeEvent(
  raw: Buffer,
  header: string | undefined,
  secret: string,
  nowMs: number,
  toleranceSeconds = 300,
): Promise<VerifiedWebhook> {
  if (header === undefined || header === '') throw new WebhookSignatureError('missing Stripe-Signature header');
  const StripeSdk = await stripeSdk();
  const signature = StripeSdk.webhooks.signature;
  if (signature === null) throw new Error('stripe-node has no webhook signature helper');
  try {
    signature.verifyHeader(raw.toString('latin1'), header, secret, toleranceSeconds, EXACT_BYTES, nowMs);
    // stripe-node only refuses a timestamp too far in the past; DESIGN §8 says 300 s either way.
    if (signedAhead(header, nowMs) > toleranceSeconds) throw new WebhookSignatureError('timestamp ahead of the tolerance zone');
  } catch (err) {
    if (err instanceof WebhookSignatureError) throw err;
    // Only the library's verdict, never the secret or the expected signature.
    const reason = err instanceof StripeSdk.errors.StripeSignatureVerificationError ? err.message : 'signature could not be verified';
    throw new WebhookSignatureError(reason);
  }
  return readEvent(raw);
}

/** How many seconds the header's furthest `t=` lies ahead of now (any of them, whichever stripe-node reads). */
function signedAhead(header: string, nowMs: number): number {
  const nowSeconds = Math.floor(nowMs / 1000);
  let ahead = Number.NEGATIVE_INFINITY;
  for (const item of header.split(',')) {
    const [key, value] = item.split('=');
    if (key?.trim() !== 't' || value === undefined) continue;
    const at = Number.parseInt(value, 10);
    ahead = Math.max(ahead, Number.isNaN(at) ? Number.NEGATIVE_INFINITY : at - nowSeconds);
  }
  return ahead;
}

function readEvent(raw: Buffer): VerifiedWebhook {
  // Decoding would turn a byte that is not UTF-8 into U+FFFD: an id or a user id other than the one sent.
  if (!isUtf8(raw)) return { kind: 'unreadable', id: undefined, type: undefined, reason: 'body is not UTF-8' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    return { kind: 'unreadable', id: undefined, type: undefined, reason: 'body is not JSON' };
  }
  const event = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  const id = typeof event['id'] === 'string' ? event['id'] : undefined;
  const type = typeof event['type'] === 'string' ? event['type'] : undefined;
  // Nothing of an event is written when any of its text cannot be stored as sent (DESIGN §10).
  const unstorable = unstorableTextAt(event);
  if (unstorable !== undefined) {
    return { kind: 'unreadable', id, type, reason: `text the store cannot hold (\\u0000 or an unpaired surrogate) at ${unstorable}` };
  }
  const data = event['data'];
  const object = typeof data === 'object' && data !== null ? (data as Record<string, unknown>)['object'] : undefined;
  if (event['object'] !== 'event') {
    return { kind: 'unreadable', id, type, reason: `not a snapshot event (object: ${JSON.stringify(event['object'] ?? null)})` };
  }
  if (id === undefined || type === undefined || typeof object !== 'object' || object === null || Array.isArray(object)) {
    return { kind: 'unreadable', id, type, reason: 'event lacks id, type or data.object' };
  }
  return { kind: 'event', event: { id, type, object: object as Record<string, unknown> } };
}
