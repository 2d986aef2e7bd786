// DESIGN §11: a result sent to the model is data, capped at 16 KB of JSON.
import type { ToolName } from './definitions.ts';

export const MAX_RESULT_BYTES = 16 * 1024;

const bytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

/**
 * The result as is when it fits; else its list shortened until it does, with `truncated: true`:
 * price bars and journal days lose their oldest (the recent end is what an answer needs), other lists
 * their tail.
 */
export function capResult(name: ToolName, result: Record<string, unknown>): Record<string, unknown> {
  if (bytes(result) <= MAX_RESULT_BYTES) return result;
  const listKey = Object.keys(result).find((k) => Array.isArray(result[k]));
  const list = listKey === undefined ? undefined : (result[listKey] as unknown[]);
  if (listKey === undefined || list === undefined) return { truncated: true, note: 'the result was too large to send' };
  const keepNewest = name === 'get_price_history' || name === 'get_journal';
  const shortened = (n: number): Record<string, unknown> => ({
    ...result,
    [listKey]: keepNewest ? list.slice(list.length - n) : list.slice(0, n),
    truncated: true,
  });
  // The largest n whose shortened result fits (n = 0 always fits: the rest of a result is small).
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (bytes(shortened(mid)) <= MAX_RESULT_BYTES) lo = mid;
    else hi = mid - 1;
  }
  return shortened(lo);
}
