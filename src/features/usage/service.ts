import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { usdOf } from './receipt.ts';
import type { RawBuilder } from 'kysely';
import * as repo from './repo.ts';
import type { UsageFiguresDto, UsageQueryInput, UsageSummaryDto } from './schemas.ts';

/** A turn as it ended, for the daily usage: counted on the UTC day of `endedAt`. */
type EndedTurn = Omit<repo.DailyTurn, 'day'> & { readonly endedAt: Date };

export type { ClosingCtes } from './repo.ts';

/** Usage's part of a turn's closing statement, given the statement's CTEs it reads. */
export type UsagePart = (ctes: repo.ClosingCtes) => RawBuilder<never>;

/** DESIGN §13: the part of a turn's closing statement that adds the turn to the user's daily usage (usage/repo.ts countTurn). */
export function countTurnPart({ endedAt, ...turn }: EndedTurn): UsagePart {
  const day = endedAt.toISOString().slice(0, 10);
  return (ctes) => repo.countTurn({ ...turn, day }, ctes);
}

/** DESIGN §13: a range holds at most this many days. */
const MAX_RANGE_DAYS = 366;
const DEFAULT_RANGE_DAYS = 30;
const DAY_MS = 86_400_000;

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `${path}: ${message}`, { details: [{ path, message }] });
}

/** A real calendar date (`2025-02-30` is not one) as UTC midnight. */
function utcDate(value: string, path: string): number {
  const ms = Date.parse(`${value}T00:00:00Z`);
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== value) throw invalid(path, 'must be a calendar date (YYYY-MM-DD)');
  return ms;
}

const dateOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** The range asked for, checked: `from` ≤ `to`, at most 366 days. */
function usageRange(query: UsageQueryInput, now: Date): { from: string; to: string } {
  const to = query.to === undefined ? Date.parse(`${dateOf(now.getTime())}T00:00:00Z`) : utcDate(query.to, '/to');
  const from = query.from === undefined ? to - (DEFAULT_RANGE_DAYS - 1) * DAY_MS : utcDate(query.from, '/from');
  if (from > to) throw invalid('/from', 'must not be after `to`');
  if ((to - from) / DAY_MS + 1 > MAX_RANGE_DAYS) throw invalid('/from', `the range may hold at most ${MAX_RANGE_DAYS} days`);
  return { from: dateOf(from), to: dateOf(to) };
}

const ZERO: UsageFiguresDto = {
  turns: 0,
  inputTokens: 0,
  outputTokens: 0,
  cachedInputTokens: 0,
  reasoningTokens: 0,
  estimatedCostUsd: 0,
  unpricedTurns: 0,
  creditsCharged: 0,
  allowanceTurns: 0,
};

type Sums = Omit<repo.UsageRow, 'key' | 'provider'>;

function figuresOf(r: Sums): UsageFiguresDto {
  return {
    turns: r.turns,
    inputTokens: r.input_tokens,
    outputTokens: r.output_tokens,
    cachedInputTokens: r.cached_input_tokens,
    reasoningTokens: r.reasoning_tokens,
    // Turns ran and none could be priced: the cost is unknown, not zero.
    estimatedCostUsd: r.priced_turns === 0 && r.turns > 0 ? null : usdOf(r.cost_micros),
    unpricedTurns: r.turns - r.priced_turns,
    creditsCharged: r.credits,
    allowanceTurns: r.allowance_turns,
  };
}

/** DESIGN §13: the caller's usage over a range of UTC days, grouped, with its total. */
export async function usageSummary(deps: Pick<Deps, 'db' | 'clock'>, userId: string, query: UsageQueryInput): Promise<UsageSummaryDto> {
  const { from, to } = usageRange(query, deps.clock.now());
  const groupBy = query.groupBy ?? 'day';
  const rows = await repo.summary(deps.db, userId, from, to, groupBy);
  const keys: (keyof Sums)[] = [
    'turns',
    'input_tokens',
    'output_tokens',
    'cached_input_tokens',
    'reasoning_tokens',
    'cost_micros',
    'priced_turns',
    'credits',
    'allowance_turns',
  ];
  const total = Object.fromEntries(keys.map((k) => [k, rows.reduce((n, r) => n + r[k], 0)])) as unknown as Sums;
  let out: UsageSummaryDto['rows'];
  if (groupBy === 'day') {
    const byDay = new Map(rows.map((r) => [r.key, r]));
    out = [];
    for (let ms = Date.parse(`${from}T00:00:00Z`); ms <= Date.parse(`${to}T00:00:00Z`); ms += DAY_MS) {
      const day = dateOf(ms);
      const r = byDay.get(day);
      out.push({ key: day, ...(r ? figuresOf(r) : ZERO) });
    }
  } else {
    out = rows.map((r) => ({ key: r.key, ...(r.provider === null ? {} : { provider: r.provider }), ...figuresOf(r) }));
  }
  return { from, to, groupBy, rows: out, total: figuresOf(total) };
}
