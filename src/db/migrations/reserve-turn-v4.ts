import { sql, type Kysely } from 'kysely';

/**
 * reserve_turn v4 and its helpers user_tier and ledger_append, frozen as migrations 0006, 0007, 0010
 * and 0017 install them (each with `create or replace`, so a fresh database ends with v4 whichever of
 * them ran last). The text, its `-- v4; source:` lines included, is what the database holds; the
 * decision is explained where billing keeps its current source. A later version ships as a new
 * migration holding that version.
 */
const RESERVE_TURN_SQL = {
  userTier: `
    create or replace function user_tier(p_user_id text, p_tiers jsonb, p_default_tier text)
    returns text language plpgsql stable as $$
    declare
      v_stored text;
    begin
      -- v4; source: src/features/billing/reserve-turn-function.ts
      select u.tier into v_stored from users u where u.id = p_user_id;
      return case when (p_tiers -> v_stored) is not null then v_stored else p_default_tier end;
    end
    $$`,

  ledgerAppend: `
    create or replace function ledger_append(
      p_id uuid, p_user_id text, p_amount bigint, p_kind text, p_reference text, p_note text, p_now timestamptz
    ) returns boolean language plpgsql as $$
    begin
      -- v4; source: src/features/billing/reserve-turn-function.ts
      -- The caller holds the wallet row's lock, so the entry and the balance move as one step.
      insert into ledger_entries (id, user_id, amount, kind, reference, note, created_at)
        values (p_id, p_user_id, p_amount, p_kind, p_reference, p_note, p_now)
        on conflict (reference) do nothing;
      if not found then
        return false;
      end if;
      update wallets set balance = balance + p_amount, updated_at = p_now where user_id = p_user_id;
      if not found then
        raise exception 'ledger_append: no wallet row for % (the caller must lock it first)', p_user_id;
      end if;
      return true;
    end
    $$`,

  reserveTurn: `
    create or replace function reserve_turn(
      p_turn_id text,
      p_user_id text,
      p_ledger_id uuid,
      p_now timestamptz,
      p_month text,
      p_allowance boolean,
      p_cost bigint,
      p_images integer,
      p_tiers jsonb,
      p_default_tier text,
      p_live_since timestamptz,
      out r_source text,
      out r_credits bigint
    ) language plpgsql as $$
    declare
      v_tier jsonb;
      v_turn_limit bigint;
      v_image_limit bigint;
      v_balance bigint;
      v_turns integer;
      v_images integer;
      v_allowance_left boolean;
    begin
      -- v4; source: src/features/billing/reserve-turn-function.ts
      v_tier := p_tiers -> user_tier(p_user_id, p_tiers, p_default_tier);
      if v_tier is null then
        raise exception 'tier % is not in the catalogue', p_default_tier;
      end if;
      v_turn_limit := (v_tier ->> 'monthlyAllowanceTurns')::bigint;
      v_image_limit := (v_tier ->> 'monthlyImages')::bigint;

      -- Both rows stay locked until commit: wallet first, then the month's usage (every money write
      -- takes them in this order), so the decision and its writes are one atomic step per user.
      -- An existing row is locked in place rather than rewritten; only a missing one is inserted (the
      -- upsert then takes the row a concurrent first turn may have inserted meanwhile, locked as well).
      select w.balance into v_balance from wallets w where w.user_id = p_user_id for update;
      if not found then
        insert into wallets as w (user_id, balance) values (p_user_id, 0)
          on conflict (user_id) do update set balance = w.balance
          returning w.balance into v_balance;
      end if;
      select m.allowance_turns, m.images into v_turns, v_images
        from monthly_usage m where m.user_id = p_user_id and m.month = p_month for update;
      if not found then
        insert into monthly_usage as m (user_id, month) values (p_user_id, p_month)
          on conflict (user_id, month) do update set images = m.images
          returning m.allowance_turns, m.images into v_turns, v_images;
      end if;

      -- Under the wallet lock, so two starts of one user cannot both pass: a reply of the user still
      -- streaming whose turn showed a sign of life since p_live_since. A silent one belongs to a turn
      -- whose instance is gone (the sweeper settles it).
      if exists (select 1 from messages m join turn_charges t on t.turn_id = m.id::text
                 where m.user_id = p_user_id and m.status = 'streaming'
                   and coalesce(t.alive_at, t.created_at) > p_live_since) then
        raise exception using errcode = 'BL409', message = 'STREAM_IN_PROGRESS';
      end if;

      if p_images > 0 and v_images + p_images > v_image_limit then
        raise exception using errcode = 'BL429', message = 'TIER_LIMIT_IMAGES',
          detail = format('limit=%s used=%s', v_image_limit, v_images);
      end if;
      v_allowance_left := v_turns < v_turn_limit;
      -- A negative balance (after a refund) never satisfies balance >= cost, so it blocks spending.
      if p_allowance and v_allowance_left then
        r_source := 'allowance';
      elsif p_cost = 0 then
        r_source := 'free';
      elsif v_balance >= p_cost then
        r_source := 'credits';
      elsif p_allowance then
        raise exception using errcode = 'BL402', message = 'ALLOWANCE_EXHAUSTED';
      elsif v_allowance_left then
        raise exception using errcode = 'BL402', message = 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE';
      else
        raise exception using errcode = 'BL402', message = 'INSUFFICIENT_CREDITS';
      end if;

      r_credits := case when r_source = 'credits' then p_cost else 0 end;
      if r_credits > 0 then
        if not ledger_append(p_ledger_id, p_user_id, -r_credits, 'turn', 'turn:' || p_turn_id, null, p_now) then
          raise exception 'turn % was already charged', p_turn_id;
        end if;
      end if;
      if r_source = 'allowance' or p_images > 0 then
        update monthly_usage
          set allowance_turns = allowance_turns + (case when r_source = 'allowance' then 1 else 0 end),
              images = images + p_images
          where user_id = p_user_id and month = p_month;
      end if;
      insert into turn_charges (turn_id, user_id, source, credits, images, month, status, created_at, settled_at)
        values (p_turn_id, p_user_id, r_source, r_credits, p_images, p_month, 'reserved', p_now, null);
    end
    $$`,
} as const;

/**
 * Installs (or replaces) the three functions, helpers first. One statement per query: PGlite runs
 * queries as prepared statements, which take only one.
 */
export async function installReserveTurnV4(db: Kysely<unknown>): Promise<void> {
  for (const text of [RESERVE_TURN_SQL.userTier, RESERVE_TURN_SQL.ledgerAppend, RESERVE_TURN_SQL.reserveTurn]) {
    await sql.raw(text).execute(db);
  }
}
