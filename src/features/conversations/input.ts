// Stage 2 of a turn, body and images: what the schema cannot say (DESIGN §7), and the request as the
// later stages take it.
import type { FastifyReply } from 'fastify';
import { PROVIDERS, type Provider } from '../../catalogue.ts';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import type { ChatImage } from '../../providers/llm/index.ts';
import { decodeImages } from './images.ts';
import type { LeaseClaim } from './lease-claim.ts';
import type { StreamMessageInput } from './schemas.ts';

interface TurnInput {
  readonly body: StreamMessageInput;
  readonly images: ChatImage[];
}

export function readInput(deps: Deps, body: StreamMessageInput): TurnInput {
  if (body.text.trim().length === 0) throw invalid('/text', 'must contain a non-whitespace character');
  if (body.personaId !== undefined && !deps.config.catalogue.personas.some((p) => p.personaId === body.personaId)) {
    throw invalid('/personaId', 'is not a known persona');
  }
  return { body, images: decodeImages(body.attachments ?? [], deps.config.maxImageBytes) };
}

/** A stream request past its admission and body checks. */
export interface TurnRequest {
  readonly userId: string;
  readonly target: string | null;
  readonly input: TurnInput;
  /** The request's claim on its user's stream lease (the admission's). */
  readonly claim: LeaseClaim;
  /** The admission's rate-limit verdict: awaited before anything is read for, stored or reserved by the turn (a 429 comes first). */
  readonly verdict: Promise<void>;
  readonly log: FastifyReply['log'];
}

export function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `${path}: ${message}`, { details: [{ path, message }] });
}

export function asProvider(name: string): Provider {
  const found = PROVIDERS.find((p) => p === name);
  if (!found) throw new Error(`conversation holds an unknown provider "${name}"`);
  return found;
}
