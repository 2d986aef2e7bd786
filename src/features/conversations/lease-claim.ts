// DESIGN §4: one live stream per user. A stream request's claim on the user's lease: asked for once,
// with the request's rate-limit verdict at admission (deps.admission); given back once — by the request when it does not stream, by the
// live turn it hands the lease to when it does.
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { streamInProgress } from './in-progress.ts';

export class LeaseClaim {
  readonly #deps: Pick<Deps, 'leases' | 'logger'>;
  readonly #userId: string;
  /** The token; null when another stream holds the lease; the store's refusal (503) when it could not be asked. */
  readonly #asked: Promise<string | null | AppError>;
  #done = false;

  /** `asked`: the admission's answer (a token, or null when the lease was not taken). */
  constructor(deps: Pick<Deps, 'leases' | 'logger'>, userId: string, asked: Promise<string | null>) {
    this.#deps = deps;
    this.#userId = userId;
    this.#asked = asked.catch((err: unknown) => {
      if (err instanceof AppError) return err;
      throw err;
    });
    this.#asked.catch(() => undefined);
  }

  /** Whether this request holds the lease (once the store has answered). */
  async held(): Promise<boolean> {
    return typeof (await this.#asked) === 'string';
  }

  /** The lease's token; else its refusal: 409 STREAM_IN_PROGRESS (another stream holds it) or the store's 503. */
  async token(): Promise<string> {
    const asked = await this.#asked;
    if (asked instanceof AppError) throw asked;
    if (asked === null) throw streamInProgress('user');
    return asked;
  }

  /** Hands the lease to the live turn that runs under it: from now on the turn gives it back. */
  async handOver(): Promise<string> {
    const token = await this.token();
    this.#done = true;
    return token;
  }

  /** Gives the lease back unless it was handed over or given back already; a failure is logged, never raised. */
  async release(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    const asked = await this.#asked.catch(() => null);
    if (typeof asked !== 'string') return;
    await this.#deps.leases.release(this.#userId, asked).catch((err: unknown) => this.#deps.logger.error({ err }, 'releasing a stream lease failed'));
  }
}
