import { sql, type Kysely } from 'kysely';

// One statement per query: PGlite runs queries as prepared statements, which take only one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table conversations (
      id uuid primary key,
      user_id text not null references users(id) on delete cascade,
      title text not null,
      provider text not null,
      model text not null,
      persona_id text,
      message_count integer not null,
      last_message_at timestamptz not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`.execute(db);
  // Serves the keyset walk (updated_at desc, id desc) of one user's list.
  await sql`create index conversations_user_updated_idx on conversations (user_id, updated_at desc, id desc)`.execute(db);
  await sql`
    create table messages (
      id uuid primary key,
      conversation_id uuid not null references conversations(id) on delete cascade,
      user_id text not null,
      seq integer not null,
      role text not null check (role in ('user', 'assistant')),
      content text not null,
      status text not null check (status in ('streaming', 'complete', 'interrupted', 'failed')),
      client_message_id uuid,
      finish_reason text,
      input_tokens integer,
      output_tokens integer,
      error_code text,
      error_retryable boolean,
      billing_source text,
      billing_credits integer,
      created_at timestamptz not null,
      completed_at timestamptz
    )`.execute(db);
  // A turn's two messages are seq n (user) and n + 1 (assistant); the index orders and pairs them.
  await sql`create unique index messages_conversation_seq_uq on messages (conversation_id, seq)`.execute(db);
  // The idempotency key (DESIGN §7): concurrent duplicates cannot both be stored.
  await sql`create unique index messages_user_client_id_uq on messages (user_id, client_message_id) where client_message_id is not null`.execute(db);
  // Replies left 'streaming' by a crashed instance are found (and closed) through this.
  await sql`create index messages_user_streaming_idx on messages (user_id) where status = 'streaming'`.execute(db);
  await sql`
    create table attachments (
      id uuid primary key,
      message_id uuid not null references messages(id) on delete cascade,
      user_id text not null,
      position integer not null,
      format text not null check (format in ('png', 'jpeg', 'webp')),
      byte_size integer not null,
      data bytea not null,
      created_at timestamptz not null
    )`.execute(db);
  await sql`create index attachments_message_idx on attachments (message_id)`.execute(db);
}
