/** Nearest-rank percentile of already sorted samples (NaN when there are none). */
function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? NaN;
}

export interface Distribution {
  readonly n: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export function distribution(samples: readonly number[]): Distribution {
  const sorted = Float64Array.from(samples).sort();
  const list = Array.from(sorted);
  let sum = 0;
  for (const x of list) sum += x;
  return {
    n: list.length,
    p50: percentile(list, 50),
    p90: percentile(list, 90),
    p99: percentile(list, 99),
    max: list.at(-1) ?? NaN,
    mean: list.length === 0 ? NaN : sum / list.length,
  };
}

export function median(xs: readonly number[]): number {
  return percentile(Array.from(Float64Array.from(xs).sort()), 50);
}

export const ms = (x: number, digits = 2): string => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');

/** 12345.6 → "12,346". */
export const int = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a');

/**
 * `clients` loops running `op` back to back, a second's warm-up and then `durationMs` timed: the times
 * of the timed calls. How a SQL baseline puts its statement under the load the service was put under.
 */
export async function closedLoops(clients: number, durationMs: number, op: () => Promise<unknown>): Promise<Distribution> {
  const samples: number[] = [];
  const loop = async (until: number, record: boolean): Promise<void> => {
    while (performance.now() < until) {
      const t = performance.now();
      await op();
      if (record) samples.push(performance.now() - t);
    }
  };
  const warm = performance.now() + 1000;
  await Promise.all(Array.from({ length: clients }, () => loop(warm, false)));
  const until = performance.now() + durationMs;
  await Promise.all(Array.from({ length: clients }, () => loop(until, true)));
  return distribution(samples);
}
