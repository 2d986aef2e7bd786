// Stage 1 of a turn, admission: the rate-limit verdict and the claim on the user's stream lease, asked
// for together in the route's onRequest hook (after authentication, before the body is read) and kept
// on the request. This stage owns the claim: it gives it back however the request ends, unless the
// start handed it to a live turn.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { applyDecision } from '../../http/rate-limit.ts';
import type { RateLimitRule } from '../../platform/rate-limiter.ts';
import { bindTrace, traced } from '../../platform/tracing.ts';
import { LeaseClaim } from './lease-claim.ts';
import { LEASE_TTL_MS } from './stream-runtime.ts';

/** DESIGN §4: new and existing conversations together. */
const ADVISOR_MESSAGES: RateLimitRule = { name: 'advisor-messages', limit: 30, windowMs: 60_000 };

/** A stream request body up to this size is read while the rate-limit verdict is on its way. */
const READ_BEFORE_VERDICT_BYTES = 64 * 1024;

/** A stream request's admission: its rate-limit verdict and its claim on the user's lease, asked for in one step. */
export interface Admission {
  readonly verdict: Promise<void>;
  readonly claim: LeaseClaim;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the stream routes' admission hook; null on every other request. */
    turnAdmission: Admission | null;
  }
}

export function decorateAdmission(app: FastifyInstance): void {
  app.decorateRequest('turnAdmission', null);
}

/**
 * A start refused because this instance drains: `503` with `Retry-After` (another instance, or this one
 * restarted, takes the same start at once; nginx sends it on itself, DESIGN §16). Raised by admission
 * and, when draining began while the request was checked, by the start.
 */
export function shuttingDown(): AppError {
  return new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down; retry shortly', { headers: { 'Retry-After': '1' } });
}

/** A stream request's slot, waiting for its turn too (`holdingSlot`). */
const slotHolders = new WeakMap<FastifyReply, (work: Promise<unknown>) => void>();

/**
 * DESIGN §16: a stream connection (a start, an attach) takes one of the instance's MAX_OPEN_STREAMS
 * slots until it closes — a start's, until its turn has ended too (`holdingSlot`) — so that open
 * connections and running turns (each holding a provider call) stay within two descriptors a slot.
 * Beyond them it is refused here, while descriptors remain to answer it.
 */
export function holdStreamSlot(deps: Deps, reply: FastifyReply): void {
  const release = deps.openStreams.take();
  if (release === null) {
    deps.metrics.streamsRefused.inc();
    throw new AppError('SERVICE_UNAVAILABLE', 'this instance has as many streams open as it may (MAX_OPEN_STREAMS); retry shortly', {
      headers: { 'Retry-After': '1' },
    });
  }
  let work: Promise<unknown> | undefined;
  reply.raw.once('close', () => void (work === undefined ? release() : work.finally(release).catch(() => undefined)));
  slotHolders.set(reply, (w) => (work = w));
}

/** A start's slot is given back once `work` (its whole turn: a turn whose client left runs on for the detach grace) has ended as well. */
export function holdingSlot<T>(reply: FastifyReply, work: Promise<T>): Promise<T> {
  slotHolders.get(reply)?.(work);
  return work;
}

/**
 * The route's onRequest hook. Every request counts (DESIGN §4); an admitted one asks for its user's
 * stream lease in the same step (one Redis round trip). The answer is left in flight while a small body
 * is read and checked, so it costs no wait of its own; a large body (images) is not read at all for a
 * request the limit refuses.
 */
export function admitTurn(deps: Deps): (req: FastifyRequest, reply: FastifyReply) => Promise<void> {
  return async (req, reply) => {
    if (deps.lifecycle.draining) throw shuttingDown();
    holdStreamSlot(deps, reply);
    const admitted = traced(req.raw, 'advisor.admission', deps.admission.admit(ADVISOR_MESSAGES, req.user.id, LEASE_TTL_MS));
    const verdict = admitted.then((a) => applyDecision(ADVISOR_MESSAGES, a.decision, reply));
    verdict.catch(() => undefined);
    const claim = new LeaseClaim(
      deps,
      req.user.id,
      admitted.then((a) => a.lease),
    );
    bindTrace(claim, req.raw);
    req.turnAdmission = { verdict, claim };
    reply.raw.once('close', () => void claim.release());
    if (!(Number(req.headers['content-length']) <= READ_BEFORE_VERDICT_BYTES)) await verdict;
  };
}

/** The route's error handler: a request the limit refuses is a 429 whatever else is wrong with it; the lease goes back first. */
export async function refuseAfterVerdict(err: unknown, req: FastifyRequest): Promise<never> {
  await req.turnAdmission?.claim.release();
  await req.turnAdmission?.verdict;
  throw err;
}

/**
 * Runs a turn's start under the request's admission: the claim goes back when the start ends, unless it
 * handed the lease to a live turn; a refusal is handled (after the verdict) before that.
 */
export async function underAdmission<T>(req: FastifyRequest, start: (admission: Admission) => Promise<T>): Promise<T> {
  const admission = req.turnAdmission;
  if (admission === null) throw new Error('a stream request was not admitted');
  try {
    return await start(admission);
  } catch (err) {
    return await refuseAfterVerdict(err, req);
  } finally {
    await admission.claim.release();
  }
}
