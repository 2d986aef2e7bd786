import type { Provider } from '../../catalogue.ts';

/** What a turn was charged at stream start; carried to settlement. */
export interface TurnCharge {
  readonly turnId: string;
  readonly userId: string;
  readonly source: 'allowance' | 'credits' | 'free';
  readonly credits: number;
  /** Images counted against the monthly image quota. */
  readonly images: number;
}

export interface TurnRequest {
  readonly turnId: string;
  readonly userId: string;
  readonly provider: Provider;
  readonly model: string;
  readonly images: number;
}

/**
 * The seam between the advisor stream and billing (DESIGN §8).
 * `reserve` decides and reserves atomically before the provider is called, or throws the refusal
 * (402 billing codes, 429 TIER_LIMIT_IMAGES). `settle` runs exactly once when the turn ends:
 * `produced` false (no delta reached the client) returns the credits, allowance turn and images.
 */
export interface TurnBilling {
  reserve(req: TurnRequest): Promise<TurnCharge>;
  settle(charge: TurnCharge, produced: boolean): Promise<void>;
}

/** Every turn free; stands in until the billing feature is configured into deps. */
export const freeTurnBilling: TurnBilling = {
  async reserve(req) {
    return { turnId: req.turnId, userId: req.userId, source: 'free', credits: 0, images: req.images };
  },
  async settle() {},
};
