// DESIGN §13: what a turn cost on the user's own key — the provider's figures summed over the turn's
// rounds, priced in integer arithmetic so that no sum ever drifts.
import type { PricingConfig } from '../../catalogue.ts';
import type { RoundUsage } from '../../providers/llm/index.ts';

/** A turn's figures. Null: the provider did not report it (never a guess presented as a report). */
export interface Receipt {
  readonly input: number | null;
  readonly output: number | null;
  /** Part of `input`. */
  readonly cachedInput: number | null;
  /** Part of `output`. */
  readonly reasoning: number | null;
  /** Micro-dollars (millionths of a USD), rounded half up once per turn. */
  readonly costMicros: number | null;
}

export const NO_RECEIPT: Receipt = { input: null, output: null, cachedInput: null, reasoning: null, costMicros: null };

// USD per million tokens is micro-dollars per token; rates are held in pico-dollars per token
// (a millionth of that) as BigInts, so every product and sum is exact.
const PICO_PER_MICRO = 1_000_000n;
const picoRate = (usdPerMTok: number): bigint => BigInt(Math.round(usdPerMTok * 1e6));

/** One round's cost in pico-dollars: the provider's own reported cost, else the catalogue's prices; null when neither. */
function roundCostPico(u: RoundUsage, pricing: PricingConfig | undefined): bigint | null {
  if (typeof u.costUsd === 'number' && Number.isFinite(u.costUsd) && u.costUsd >= 0) return BigInt(Math.round(u.costUsd * 1e12));
  if (!pricing) return null;
  const cached = BigInt(Math.min(Math.max(u.cachedInput ?? 0, 0), u.input));
  const uncached = BigInt(u.input) - cached;
  const cachedRate = picoRate(pricing.cachedInputPerMTok ?? pricing.inputPerMTok);
  return uncached * picoRate(pricing.inputPerMTok) + cached * cachedRate + BigInt(u.output) * picoRate(pricing.outputPerMTok);
}

/**
 * The turn's receipt from the rounds that reported usage (a round cut off before its usage arrived
 * adds nothing: the figures are what was counted). A part figure (cached, reasoning) or the cost is
 * known for the turn only when every reporting round gave it.
 */
export function receiptOf(rounds: readonly RoundUsage[], pricing: PricingConfig | undefined): Receipt {
  if (rounds.length === 0) return NO_RECEIPT;
  const part = (pick: (r: RoundUsage) => number | null | undefined): number | null =>
    rounds.every((r) => typeof pick(r) === 'number') ? rounds.reduce((n, r) => n + (pick(r) ?? 0), 0) : null;
  let pico: bigint | null = 0n;
  for (const r of rounds) {
    const c = roundCostPico(r, pricing);
    pico = c === null || pico === null ? null : pico + c;
  }
  return {
    input: rounds.reduce((n, r) => n + r.input, 0),
    output: rounds.reduce((n, r) => n + r.output, 0),
    cachedInput: part((r) => r.cachedInput),
    reasoning: part((r) => r.reasoning),
    costMicros: pico === null ? null : Number((pico + PICO_PER_MICRO / 2n) / PICO_PER_MICRO),
  };
}

/** Micro-dollars as the API shows them (USD); exact for any sum below 2^53 micro-dollars. */
export const usdOf = (micros: number | null): number | null => (micros === null ? null : micros / 1e6);

/** The receipt in the API's words (`done.usage`, a message's `usage`). */
export function usageDto(r: Receipt): {
  inputTokens: number | null;
  outputTokens: number | null;
  cachedInputTokens: number | null;
  reasoningTokens: number | null;
  estimatedCostUsd: number | null;
} {
  return {
    inputTokens: r.input,
    outputTokens: r.output,
    cachedInputTokens: r.cachedInput,
    reasoningTokens: r.reasoning,
    estimatedCostUsd: usdOf(r.costMicros),
  };
}
