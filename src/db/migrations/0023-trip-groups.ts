import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §17 speed: the round trips of each trading day summed per group of the report groupings
 * that have a few groups a day (`all`, side, weekday, holdTime, tag), kept on write beside the round trips
 * (features/journal/record.ts). A report by one grouping, and a what-if excluding values of one
 * grouping, read a few rows a day instead of every round trip of the range: over 28,731 round trips
 * the embedded store took 120–370 ms to sum them each time.
 *
 * `key` is the group's value as the report names it; a round trip without tags is in the tag group ''
 * (a tag has at least one character). The rows of the round trips stored before this are made here,
 * with the grouping written out as it stands today (a migration does not follow later code).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table trade_trip_groups (
      account_id uuid not null references accounts(id) on delete cascade,
      dimension text not null,
      trading_day date not null,
      key text not null,
      trips integer not null,
      fills integer not null,
      realized numeric not null,
      fees numeric not null,
      net numeric not null,
      wins integer not null,
      losses integer not null,
      gross_win numeric not null,
      gross_loss numeric not null,
      largest_win numeric,
      largest_loss numeric,
      r_sum numeric not null,
      r_count integer not null,
      risk_net numeric not null,
      risk_sum numeric not null,
      primary key (account_id, dimension, trading_day, key)
    )`.execute(db);
  const sums = sql`count(*), sum(rt.fills), sum(rt.realized_pnl), sum(rt.fees), sum(rt.net_pnl),
    count(*) filter (where rt.net_pnl > 0), count(*) filter (where rt.net_pnl < 0),
    coalesce(sum(rt.net_pnl) filter (where rt.net_pnl > 0), 0), coalesce(sum(rt.net_pnl) filter (where rt.net_pnl < 0), 0),
    max(rt.net_pnl) filter (where rt.net_pnl > 0), min(rt.net_pnl) filter (where rt.net_pnl < 0),
    coalesce(sum(rt.r_multiple), 0), count(rt.r_multiple),
    coalesce(sum(rt.net_pnl) filter (where rt.initial_risk is not null), 0), coalesce(sum(rt.initial_risk), 0)`;
  await sql`insert into trade_trip_groups (account_id, trading_day, dimension, key, trips, fills, realized, fees, net, wins, losses, gross_win,
      gross_loss, largest_win, largest_loss, r_sum, r_count, risk_net, risk_sum)
    select rt.account_id, rt.trading_day,
      case when grouping(rt.side) = 0 then 'side' when grouping(rt.weekday) = 0 then 'weekday' when grouping(rt.hold) = 0 then 'holdTime' else 'all' end,
      coalesce(rt.side, rt.weekday, rt.hold, ''), ${sums}
    from (select *, to_char(rt.opening_day, 'dy') as weekday,
        case when rt.hold_seconds < 60 then '<1m' when rt.hold_seconds < 300 then '1m-5m' when rt.hold_seconds < 1800 then '5m-30m'
          when rt.hold_seconds < 7200 then '30m-2h' when rt.hold_seconds < 86400 then '2h-1d' when rt.hold_seconds < 604800 then '1d-1w'
          else '>=1w' end as hold
      from trade_round_trips rt) rt
    group by grouping sets ((rt.account_id, rt.trading_day), (rt.account_id, rt.trading_day, rt.side), (rt.account_id, rt.trading_day, rt.weekday),
      (rt.account_id, rt.trading_day, rt.hold))
    union all
    select rt.account_id, rt.trading_day, 'tag', t.tag, ${sums}
    from trade_round_trips rt
    cross join lateral (select jsonb_array_elements_text(rt.tags) as tag union all select '' where rt.tags = '[]'::jsonb) t
    group by rt.account_id, rt.trading_day, t.tag`.execute(db);
}
