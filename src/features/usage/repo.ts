import { sql, type RawBuilder } from 'kysely';
import type { Cte } from '../../db/cte.ts';
import type { Db } from '../../db/types.ts';
import type { Receipt } from './receipt.ts';

/** A turn as the daily usage counts it. */
export interface DailyTurn {
  readonly userId: string;
  /** UTC date (YYYY-MM-DD) the turn ended. */
  readonly day: string;
  readonly provider: string;
  readonly model: string;
  readonly receipt: Receipt;
}

/** The CTEs of a turn's closing statement that usage's part reads. */
export interface ClosingCtes {
  /** One row when this statement is the one ending the reply, so a retried statement never counts twice. */
  readonly ended: Cte<'ended'>;
  /** Billing's row `(credits, source)` when the turn was charged: credits taken, an allowance turn used. */
  readonly settlement: Cte<'settlement'>;
}

/**
 * Adds one ended turn to `usage_daily`, as a part of the statement that stores the turn's end; it
 * reads that statement's `ended` and `settlement` (ClosingCtes). Figures a provider did not report add
 * nothing; `priced_turns` counts the turns whose cost is known.
 */
export function countTurn(t: DailyTurn, { ended, settlement }: ClosingCtes): RawBuilder<never> {
  const r = t.receipt;
  return sql<never>`insert into usage_daily as u (user_id, day, provider, model, turns, input_tokens, output_tokens,
      cached_input_tokens, reasoning_tokens, cost_micros, priced_turns, credits, allowance_turns)
    select ${t.userId}, ${t.day}::date, ${t.provider}, ${t.model}, 1, ${r.input ?? 0}::bigint, ${r.output ?? 0}::bigint,
      ${r.cachedInput ?? 0}::bigint, ${r.reasoning ?? 0}::bigint, ${r.costMicros ?? 0}::bigint, ${r.costMicros === null ? 0 : 1}::int,
      coalesce((select sum(credits) from ${settlement.ref}), 0), (select count(*) from ${settlement.ref} where source = 'allowance')::int
    from ${ended.ref}
    on conflict (user_id, day, provider, model) do update set
      turns = u.turns + 1,
      input_tokens = u.input_tokens + excluded.input_tokens,
      output_tokens = u.output_tokens + excluded.output_tokens,
      cached_input_tokens = u.cached_input_tokens + excluded.cached_input_tokens,
      reasoning_tokens = u.reasoning_tokens + excluded.reasoning_tokens,
      cost_micros = u.cost_micros + excluded.cost_micros,
      priced_turns = u.priced_turns + excluded.priced_turns,
      credits = u.credits + excluded.credits,
      allowance_turns = u.allowance_turns + excluded.allowance_turns`;
}

export type GroupBy = 'day' | 'model' | 'provider';

export interface UsageRow {
  /** The day (YYYY-MM-DD), the model or the provider. */
  readonly key: string;
  /** For groupBy=model: the model's provider. */
  readonly provider: string | null;
  readonly turns: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cached_input_tokens: number;
  readonly reasoning_tokens: number;
  readonly cost_micros: number;
  readonly priced_turns: number;
  readonly credits: number;
  readonly allowance_turns: number;
}

/**
 * A user's usage from `from` to `to` (UTC dates, both included), grouped: one index-only range scan
 * of the primary key (it carries the figures), aggregated in key order for days.
 */
export async function summary(db: Db, userId: string, from: string, to: string, groupBy: GroupBy): Promise<UsageRow[]> {
  const [key, provider, group] =
    groupBy === 'day'
      ? [sql`day::text`, sql`null::text`, sql`day`]
      : groupBy === 'model'
        ? [sql`model`, sql`provider`, sql`provider, model`]
        : [sql`provider`, sql`null::text`, sql`provider`];
  const { rows } = await sql<UsageRow>`
    select ${key} as key, ${provider} as provider, sum(turns)::int8 as turns, sum(input_tokens)::int8 as input_tokens,
      sum(output_tokens)::int8 as output_tokens, sum(cached_input_tokens)::int8 as cached_input_tokens,
      sum(reasoning_tokens)::int8 as reasoning_tokens, sum(cost_micros)::int8 as cost_micros,
      sum(priced_turns)::int8 as priced_turns, sum(credits)::int8 as credits, sum(allowance_turns)::int8 as allowance_turns
    from usage_daily
    where user_id = ${userId} and day between ${from}::date and ${to}::date
    group by ${group}
    order by ${group}`.execute(db);
  return rows;
}
