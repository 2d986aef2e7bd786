import { sql, type Kysely } from 'kysely';

/**
 * DESIGN §13: usage receipts. An assistant message keeps the whole of its provider's figures (the
 * cached and reasoning parts, the estimated cost in integer micro-dollars); `usage_daily` sums them
 * per user, UTC day, provider and model as turns end (written in the statement that stores the end),
 * so a summary over a year reads at most a few hundred rows whatever the number of turns, and keeps
 * counting what was spent after a conversation is deleted. A key a provider refused during a turn
 * keeps when and why.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table messages add column cached_input_tokens integer, add column reasoning_tokens integer, add column cost_micros bigint`.execute(db);
  await sql`
    create table usage_daily (
      user_id text not null references users(id) on delete cascade,
      day date not null,
      provider text not null,
      model text not null,
      turns integer not null check (turns >= 0),
      input_tokens bigint not null check (input_tokens >= 0),
      output_tokens bigint not null check (output_tokens >= 0),
      cached_input_tokens bigint not null check (cached_input_tokens >= 0),
      reasoning_tokens bigint not null check (reasoning_tokens >= 0),
      cost_micros bigint not null check (cost_micros >= 0),
      priced_turns integer not null check (priced_turns >= 0),
      credits bigint not null check (credits >= 0),
      allowance_turns integer not null check (allowance_turns >= 0),
      -- The figures ride in the key's index, so a summary is an index-only range scan (no heap visit).
      primary key (user_id, day, provider, model)
        include (turns, input_tokens, output_tokens, cached_input_tokens, reasoning_tokens, cost_micros, priced_turns, credits, allowance_turns)
    )`.execute(db);
  for (const table of ['provider_keys', 'market_data_keys']) {
    await sql`alter table ${sql.table(table)} add column rejected_at timestamptz, add column rejected_reason text`.execute(db);
  }
}
