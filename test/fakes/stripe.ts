// Fake of the slice of Stripe's REST API the service uses (Checkout Sessions), speaking the real
// wire format so stripe-node can be pointed at it: bracket-encoded forms, Bearer secret keys,
// Idempotency-Key replay, Stripe error bodies. Plus the webhook signing scheme for tests.
import type { ServerResponse } from 'node:http';
import { createHmac } from 'node:crypto';
import type { FakeServer, KeyRing, ProbeBehaviour, RecordedRequest } from './http-fake.ts';
import { bearer, keyRing, probeStatus, randomId, sendJson, startFake } from './http-fake.ts';

export interface StripeFakeOptions {
  /** Known price ids for `line_items[i][price]`; unknown ones answer `resource_missing`. */
  prices?: Record<string, { unit_amount: number; currency: string }>;
}

export interface CheckoutRecord {
  request: RecordedRequest;
  /** The form body decoded into nested objects/arrays (values stay strings, as sent). */
  params: Record<string, unknown>;
  idempotencyKey: string | undefined;
  replayed: boolean;
  session: StripeSession | undefined;
}

export type StripeSession = Record<string, unknown> & { id: string; object: 'checkout.session' };

export interface StripeFake extends FakeServer, KeyRing {
  checkouts: CheckoutRecord[];
  setProbe(b: ProbeBehaviour): void;
  /** The next `times` requests answer `status` with Stripe's error body (not stored for idempotency). */
  failNext(status: number, times?: number): void;
  getSession(id: string): StripeSession | undefined;
  /** Marks a session paid/complete as Stripe would after checkout; returns the updated object. */
  completeSession(id: string, paymentStatus?: 'paid' | 'unpaid' | 'no_payment_required'): StripeSession;
}

const ERRORS: Record<number, Record<string, string>> = {
  400: { type: 'invalid_request_error', message: 'Invalid request.' },
  402: { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' },
  403: { type: 'invalid_request_error', code: 'secret_key_required', message: 'The provided key does not have the required permissions for this endpoint.' },
  404: { type: 'invalid_request_error', code: 'resource_missing', message: 'Unrecognized request URL.' },
  409: { type: 'idempotency_error', message: 'There is currently another in-progress request using this Idempotency Key.' },
  429: {
    type: 'invalid_request_error',
    code: 'rate_limit',
    message: 'Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.',
  },
  500: { type: 'api_error', message: "Something went wrong on Stripe's end." },
};

function stripeError(res: ServerResponse, status: number, override: Record<string, string> = {}): void {
  const error = { ...(ERRORS[status] ?? ERRORS[500]), ...override };
  sendJson(res, status, { error }, { 'request-id': randomId('req_', 7) });
}

function maskSecret(key: string): string {
  return key.length <= 12 ? '****' : `${key.slice(0, 8)}${'*'.repeat(key.length - 12)}${key.slice(-4)}`;
}

export async function startStripeFake(opts: StripeFakeOptions = {}): Promise<StripeFake> {
  const keys = keyRing('sk_test_fake_stripe');
  const checkouts: CheckoutRecord[] = [];
  const sessions = new Map<string, StripeSession>();
  const idempotent = new Map<string, { fingerprint: string; session: StripeSession }>();
  let probe: ProbeBehaviour = 'ok';
  let failures: number[] = [];
  let origin = '';

  const fake = await startFake((req, res) => {
    if (req.method === 'GET' && req.path.startsWith('/c/pay/')) {
      res.writeHead(200, { 'content-type': 'text/html' });
      return void res.end('<!doctype html><title>Fake Stripe Checkout</title>');
    }
    if (probe === 'stall') return;
    const failure = failures.shift();
    if (failure !== undefined) return stripeError(res, failure);
    const forced = probeStatus(probe, 500);
    if (forced !== undefined) return stripeError(res, forced);
    const key = bearer(req);
    if (key === undefined) {
      return stripeError(res, 401, {
        message:
          "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/.",
      });
    }
    if (!keys.isValid(key)) return stripeError(res, 401, { type: 'invalid_request_error', message: `Invalid API Key provided: ${maskSecret(key)}` });
    if (req.method === 'POST' && req.path === '/v1/checkout/sessions') return create(req, res);
    const m = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(req.path);
    if (req.method === 'GET' && m !== null) {
      const id = decodeURIComponent(m[1] ?? '');
      const session = sessions.get(id);
      if (session === undefined) return stripeError(res, 404, { message: `No such checkout.session: '${id}'`, param: 'id' });
      return sendJson(res, 200, session, { 'request-id': randomId('req_', 7) });
    }
    return stripeError(res, 404, { message: `Unrecognized request URL (${req.method}: ${req.path}).` });
  });
  origin = fake.url;

  function create(req: RecordedRequest, res: ServerResponse): void {
    const params = parseStripeForm(req.body);
    const idempotencyKey = req.headers['idempotency-key'];
    const entry: CheckoutRecord = { request: req, params, idempotencyKey, replayed: false, session: undefined };
    checkouts.push(entry);
    if (idempotencyKey !== undefined) {
      const prior = idempotent.get(idempotencyKey);
      if (prior !== undefined && prior.fingerprint !== req.body) {
        return stripeError(res, 400, {
          type: 'idempotency_error',
          message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
        });
      }
      if (prior !== undefined) {
        entry.replayed = true;
        entry.session = prior.session;
        return sendJson(res, 200, prior.session, { 'request-id': randomId('req_', 7), 'idempotent-replayed': 'true', 'idempotency-key': idempotencyKey });
      }
    }
    const built = buildSession(params, origin, opts.prices ?? {});
    if ('error' in built) return stripeError(res, 400, built.error);
    sessions.set(built.session.id, built.session);
    if (idempotencyKey !== undefined) idempotent.set(idempotencyKey, { fingerprint: req.body, session: built.session });
    entry.session = built.session;
    sendJson(res, 200, built.session, { 'request-id': randomId('req_', 7), ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }) });
  }

  return {
    ...fake,
    ...keys,
    checkouts,
    setProbe: (b) => void (probe = b),
    failNext: (status, times = 1) => void (failures = [...failures, ...Array<number>(times).fill(status)]),
    getSession: (id) => sessions.get(id),
    completeSession(id, paymentStatus = 'paid') {
      const session = sessions.get(id);
      if (session === undefined) throw new Error(`stripe fake: no session ${id}`);
      const done: StripeSession = { ...session, status: 'complete', payment_status: paymentStatus, payment_intent: randomId('pi_', 12), url: null };
      sessions.set(id, done);
      return done;
    },
  };
}

type Built = { session: StripeSession } | { error: Record<string, string> };

function buildSession(p: Record<string, unknown>, origin: string, prices: NonNullable<StripeFakeOptions['prices']>): Built {
  const mode = p['mode'];
  if (mode === undefined) return { error: { code: 'parameter_missing', param: 'mode', message: 'Missing required param: mode.' } };
  if (mode !== 'payment' && mode !== 'setup' && mode !== 'subscription') {
    return { error: { code: 'parameter_invalid_string', param: 'mode', message: 'Invalid mode: must be one of payment, setup, or subscription' } };
  }
  const items = Array.isArray(p['line_items']) ? (p['line_items'] as unknown[]) : [];
  if (mode === 'payment' && items.length === 0) {
    return { error: { code: 'parameter_missing', param: 'line_items', message: 'Missing required param: line_items.' } };
  }
  let amount = 0;
  let currency: string | null = null;
  for (const [i, raw] of items.entries()) {
    const item = isObj(raw) ? raw : {};
    const quantity = item['quantity'] === undefined ? 1 : Number(item['quantity']);
    const pd = isObj(item['price_data']) ? item['price_data'] : undefined;
    const price = typeof item['price'] === 'string' ? prices[item['price']] : undefined;
    if (pd === undefined && price === undefined) {
      return { error: { code: 'resource_missing', param: `line_items[${i}][price]`, message: `No such price: '${String(item['price'])}'` } };
    }
    const unit = pd === undefined ? price?.unit_amount : Number(pd['unit_amount']);
    if (unit === undefined || !Number.isInteger(unit) || !Number.isInteger(quantity)) {
      return { error: { code: 'parameter_invalid_integer', param: `line_items[${i}][price_data][unit_amount]`, message: 'Invalid integer' } };
    }
    amount += unit * quantity;
    currency = pd === undefined ? (price?.currency ?? null) : String(pd['currency']);
  }
  const id = randomId('cs_test_', 29);
  const created = Math.floor(Date.now() / 1000);
  const str = (k: string): string | null => (typeof p[k] === 'string' ? (p[k] as string) : null);
  const session: StripeSession = {
    id,
    object: 'checkout.session',
    amount_subtotal: items.length > 0 ? amount : null,
    amount_total: items.length > 0 ? amount : null,
    cancel_url: str('cancel_url'),
    client_reference_id: str('client_reference_id'),
    created,
    currency,
    customer: null,
    customer_email: str('customer_email'),
    expires_at: created + 24 * 3600,
    livemode: false,
    metadata: isObj(p['metadata']) ? p['metadata'] : {},
    mode,
    payment_intent: null,
    payment_method_types: ['card'],
    payment_status: 'unpaid',
    status: 'open',
    success_url: str('success_url'),
    ui_mode: 'hosted',
    url: `${origin}/c/pay/${id}`,
  };
  return { session };
}

function isObj(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** Decodes Stripe's bracket form encoding (`a[b][0][c]=v`) into nested objects and arrays. */
export function parseStripeForm(body: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [name, value] of new URLSearchParams(body)) {
    const head = /^[^[]+/.exec(name)?.[0] ?? name;
    const path = [head, ...Array.from(name.slice(head.length).matchAll(/\[([^\]]*)\]/g), (m) => m[1] ?? '')];
    if (path.some((s) => s === '__proto__' || s === 'constructor' || s === 'prototype')) continue;
    let node = root;
    for (const [i, seg] of path.entries()) {
      const k = seg === '' ? String(Object.keys(node).length) : seg;
      if (i === path.length - 1) {
        node[k] = value;
      } else {
        const next = node[k];
        node = isObj(next) ? next : ((node[k] = {}) as Record<string, unknown>);
      }
    }
  }
  return arrayify(root) as Record<string, unknown>;
}

function arrayify(x: unknown): unknown {
  if (!isObj(x)) return x;
  const keys = Object.keys(x);
  const entries = keys.map((k) => [k, arrayify(x[k])] as const);
  const isList = keys.length > 0 && keys.every((k, i) => k === String(i));
  return isList ? entries.map(([, v]) => v) : Object.fromEntries(entries);
}

/** A `Stripe-Signature` header value: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "t.payload")>`. */
export function signStripePayload(payload: string, secret: string, timestamp = Math.floor(Date.now() / 1000)): string {
  const v1 = createHmac('sha256', secret).update(`${timestamp}.${payload}`, 'utf8').digest('hex');
  return `t=${timestamp},v1=${v1}`;
}

/** An Event object as Stripe delivers it to a webhook endpoint (serialize with JSON.stringify). */
export function makeStripeEvent(type: string, object: Record<string, unknown>, id = randomId('evt_', 12)): Record<string, unknown> {
  return {
    id,
    object: 'event',
    api_version: '2026-10-28.endive',
    created: Math.floor(Date.now() / 1000),
    data: { object },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

/**
 * A Dispute object as Stripe puts it in `charge.dispute.*` events for a completed session's payment:
 * `charge` and `payment_intent` unexpanded (ids), `amount` the disputed amount in minor units.
 */
export function makeStripeDispute(session: StripeSession, o: { id?: string; amount?: number; status?: string; reason?: string } = {}): Record<string, unknown> {
  const paymentIntent = session['payment_intent'];
  if (typeof paymentIntent !== 'string') throw new Error('stripe fake: a dispute needs a completed session (payment_intent)');
  const created = Math.floor(Date.now() / 1000);
  return {
    id: o.id ?? randomId('du_', 12),
    object: 'dispute',
    amount: o.amount ?? session['amount_total'],
    balance_transactions: [],
    charge: `ch_${paymentIntent.slice(3)}`,
    created,
    currency: session['currency'],
    enhanced_eligibility_types: [],
    evidence: { customer_email_address: null, customer_name: null, product_description: null, refund_policy: null, uncategorized_text: null },
    evidence_details: { due_by: created + 7 * 86_400, has_evidence: false, past_due: false, submission_count: 0 },
    is_charge_refundable: false,
    livemode: false,
    metadata: {},
    payment_intent: paymentIntent,
    reason: o.reason ?? 'fraudulent',
    status: o.status ?? 'needs_response',
  };
}

/** A thin (v2) event notification, as Stripe sends to an event destination: no `data.object`. */
export function makeStripeThinEvent(type = 'v1.billing.meter.error_report_triggered'): Record<string, unknown> {
  const meter = randomId('mtr_test_', 12);
  return {
    id: randomId('evt_test_', 12),
    object: 'v2.core.event',
    type,
    livemode: false,
    created: new Date().toISOString(),
    related_object: { id: meter, type: 'billing.meter', url: `/v1/billing/meters/${meter}` },
  };
}
