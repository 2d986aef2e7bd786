import type { ColumnType, Generated, Kysely, Transaction } from 'kysely';

/** timestamptz: read as Date, written as Date (or defaulted by the database). */
type Timestamp = ColumnType<Date, Date | undefined, Date>;

interface UsersTable {
  id: string;
  tier: string | null;
  created_at: Generated<Date>;
}

export interface BrokeragesTable {
  id: string;
  user_id: string;
  name: string;
  created_at: Generated<Date>;
}

export interface AccountsTable {
  id: string;
  user_id: string;
  name: string;
  /** The name's comparison form, unique per user (features/accounts/name-key.ts; migration 0009). */
  name_key: string;
  currency: string;
  timezone: string;
  brokerage_id: string | null;
  /** numeric: read as a decimal string, never a float. */
  starting_balance: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface AccountTimezonesTable {
  account_id: string;
  timezone: string;
  effective_from: Date;
}

/** One row per admitted hit of a rolling-window limit (migration 0002-platform). */
interface RateLimitHitsTable {
  /** The rule name. */
  bucket: string;
  subject: string;
  at: Date;
}

/** The one live stream a user may have; free once `expires_at` has passed. */
interface StreamLeasesTable {
  user_id: string;
  token: string;
  expires_at: Date;
}

/** A user's language-model key, sealed by the vault (migration 0003-advisor-keys). */
export interface ProviderKeysTable {
  user_id: string;
  provider: string;
  key_id: string;
  /** bytea: pg gives a Buffer, PGlite a Uint8Array. */
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  tag: Uint8Array;
  key_hint_tail: string;
  default_model: string;
  active: boolean;
  /** When a probe last accepted this key; null when it was stored unverified. */
  last_verified_at: Date | null;
  /** DESIGN §13: when and why the provider refused this key during a turn; cleared by a new save. */
  rejected_at: Date | null;
  rejected_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A user's market-data key (one per user), sealed by the vault. */
export interface MarketDataKeysTable {
  user_id: string;
  provider: string;
  key_id: string;
  /** bytea: pg gives a Buffer, PGlite a Uint8Array. */
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  tag: Uint8Array;
  key_hint_tail: string;
  last_verified_at: Date | null;
  /** DESIGN §13: when and why the provider refused this key during a turn; cleared by a new save. */
  rejected_at: Date | null;
  rejected_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Cached wallet balance; always equal to the sum of the user's ledger entries (migration 0005-billing). */
interface WalletsTable {
  user_id: string;
  balance: number;
  updated_at: Timestamp;
}

/** Append-only (the database refuses update, delete and truncate); `reference` is unique. */
export interface LedgerEntriesTable {
  seq: Generated<number>;
  id: string;
  user_id: string;
  amount: number;
  kind: 'purchase' | 'turn' | 'turn-return' | 'refund' | 'grant';
  reference: string;
  note: string | null;
  created_at: Date;
}

/** Allowance turns and images used in one calendar month (UTC, 'YYYY-MM'). */
interface MonthlyUsageTable {
  user_id: string;
  month: string;
  allowance_turns: Generated<number>;
  images: Generated<number>;
}

/** What a turn reserved at stream start, until it is settled. */
export interface TurnChargesTable {
  turn_id: string;
  user_id: string;
  source: 'allowance' | 'credits' | 'free';
  credits: number;
  images: number;
  month: string;
  status: 'reserved' | 'charged' | 'returned';
  created_at: Date;
  settled_at: Date | null;
  /** Last sign of life of the running turn (its heartbeat); null until the first one (migration 0015). */
  alive_at: Date | null;
}

/** A checkout started for a pack, with credits and amount fixed at that moment. */
export interface PurchasesTable {
  id: string;
  user_id: string;
  pack_id: string;
  credits: number;
  amount: number;
  currency: string;
  session_id: string;
  payment_intent: string | null;
  /** `expired` / `failed`: the processor closed the session unpaid (migration 0024). */
  status: 'pending' | 'paid' | 'expired' | 'failed';
  created_at: Date;
  paid_at: Date | null;
}

/** An advisor conversation; keeps the provider and model it started with (migration 0004-conversations). */
export interface ConversationsTable {
  id: string;
  user_id: string;
  title: string;
  provider: string;
  model: string;
  persona_id: string | null;
  message_count: number;
  last_message_at: Date;
  created_at: Date;
  updated_at: Date;
}

/**
 * A conversation's words for `GET /api/advisor/conversations?q=` (migration 0019): a tsvector of its
 * title and messages (positions stripped) with its owner's mark; derived data, rebuilt from them at will.
 */
interface ConversationSearchTable {
  conversation_id: string;
  document: string;
}

/** A user message (seq n) and its assistant reply (seq n + 1); the reply is 'streaming' until its turn ends. */
export interface MessagesTable {
  id: string;
  conversation_id: string;
  user_id: string;
  seq: number;
  role: 'user' | 'assistant';
  content: string;
  status: 'streaming' | 'complete' | 'interrupted' | 'failed';
  client_message_id: string | null;
  finish_reason: string | null;
  input_tokens: number | null;
  output_tokens: number | null;
  /** DESIGN §13: parts of input_tokens / output_tokens; null when the provider did not report them. */
  cached_input_tokens: number | null;
  reasoning_tokens: number | null;
  /** What the turn cost on the user's own key, in micro-dollars ; null when unknown. */
  cost_micros: number | null;
  /** DESIGN §12: the id of the terminal frame of the reply's stream; null while streaming (or for a turn whose instance died). */
  last_frame_id: number | null;
  error_code: string | null;
  error_retryable: boolean | null;
  billing_source: string | null;
  billing_credits: number | null;
  /** jsonb: the reply's text, tool calls and results in order (StoredPart[]); null for a text-only reply. */
  parts: unknown;
  /** jsonb: DESIGN §18's check of a reply's figures (Grounding); null before the check existed, and for a reply the crash sweeper closed. */
  grounding: unknown;
  created_at: Date;
  completed_at: Date | null;
}

/** DESIGN §12: a turn's frame log when PostgreSQL is the shared store (migration 0016). */
interface StreamLogsTable {
  turn_id: string;
  expires_at: Date;
}

interface StreamFramesTable {
  turn_id: string;
  id: number;
  wire: string;
  terminal: boolean;
}

/** An image sent with a user message. */
export interface AttachmentsTable {
  id: string;
  message_id: string;
  user_id: string;
  /** Order within its message (0-based), as sent. */
  position: number;
  format: 'png' | 'jpeg' | 'webp';
  byte_size: number;
  /** bytea: pg gives a Buffer, PGlite a Uint8Array. */
  data: Uint8Array;
  created_at: Date;
}

/** DESIGN §13: a user's usage per UTC day, provider and model, summed as turns end (migration 0014). */
interface UsageDailyTable {
  user_id: string;
  day: string;
  provider: string;
  model: string;
  turns: number;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  reasoning_tokens: number;
  cost_micros: number;
  priced_turns: number;
  credits: number;
  allowance_turns: number;
}

/** DESIGN §14: a fill, with what FIFO matching made of it (migration 0018-trades; features/journal). */
export interface TradesTable {
  id: string;
  account_id: string;
  symbol: string;
  side: 'buy' | 'sell';
  /** numeric: read as decimal strings. */
  quantity: string;
  price: string;
  fee: string;
  executed_at: Date;
  /** date: written and read as 'YYYY-MM-DD' text (selected with ::text). */
  trading_day: string;
  external_id: string | null;
  /** An imported row without externalId: a digest of its own fields (journal/import.ts). */
  import_key: string | null;
  note: string | null;
  /** jsonb string[]. */
  tags: unknown;
  created_at: Date;
  realized_pnl: string;
  trip_net: string | null;
  position_quantity: string;
  position_cost: string;
  position_opened_at: Date | null;
  /** DESIGN §17 (migration 0021): stock, future, option, forex, crypto, cfd. */
  asset_class: string;
  multiplier: string;
  stop_price: string | null;
}

/** A symbol's open lots after its last fill (journal/fifo.ts StoredBook as jsonb). */
interface TradeBooksTable {
  account_id: string;
  symbol: string;
  book: unknown;
  /** 1: written before round trips were kept (journal/rebuild.ts replays it); 2: current. */
  version: number;
}

/** DESIGN §17: a closed round trip (migration 0021; journal/round-trips.ts). */
interface TradeRoundTripsTable {
  /** The id of the fill that closed it. */
  id: string;
  account_id: string;
  symbol: string;
  side: 'long' | 'short';
  asset_class: string;
  multiplier: string;
  opened_at: Date;
  closed_at: Date;
  opening_day: string;
  trading_day: string;
  open_hour: number;
  max_quantity: string;
  entry_average: string;
  exit_average: string;
  realized_pnl: string;
  fees: string;
  net_pnl: string;
  initial_risk: string | null;
  /** netPnl / initialRisk, half to even at 4 places. */
  r_multiple: string | null;
  hold_seconds: string;
  fills: number;
  /** jsonb string[]. */
  tags: unknown;
}

/** A trading day's round trips summed per group of one report grouping (migration 0023; journal/repo.ts). */
interface TradeTripGroupsTable {
  account_id: string;
  /** `all` or a report grouping (journal/repo.ts TripDimension). */
  dimension: string;
  trading_day: string;
  /** The group's value as the report names it; '' for the tag group of round trips without tags. */
  key: string;
  trips: number;
  fills: number;
  realized: string;
  fees: string;
  net: string;
  wins: number;
  losses: number;
  gross_win: string;
  gross_loss: string;
  largest_win: string | null;
  largest_loss: string | null;
  r_sum: string;
  r_count: number;
  risk_net: string;
  risk_sum: string;
}

/** One trading day's journal figures (journal/journal.ts DayFigures). */
export interface TradeDaysTable {
  account_id: string;
  trading_day: string;
  realized_pnl: string;
  fees: string;
  fills: number;
  round_trips: number;
  wins: number;
  losses: number;
  gross_win: string;
  gross_loss: string;
  largest_win: string | null;
  largest_loss: string | null;
  last_executed_at: Date;
  last_id: string;
}

/**
 * Every table of the service. Each feature's migration adds its tables here.
 */
export interface DB {
  users: UsersTable;
  brokerages: BrokeragesTable;
  accounts: AccountsTable;
  account_timezones: AccountTimezonesTable;
  rate_limit_hits: RateLimitHitsTable;
  stream_leases: StreamLeasesTable;
  stream_logs: StreamLogsTable;
  stream_frames: StreamFramesTable;
  conversations: ConversationsTable;
  conversation_search: ConversationSearchTable;
  messages: MessagesTable;
  attachments: AttachmentsTable;
  provider_keys: ProviderKeysTable;
  market_data_keys: MarketDataKeysTable;
  wallets: WalletsTable;
  ledger_entries: LedgerEntriesTable;
  monthly_usage: MonthlyUsageTable;
  turn_charges: TurnChargesTable;
  purchases: PurchasesTable;
  usage_daily: UsageDailyTable;
  trades: TradesTable;
  trade_books: TradeBooksTable;
  trade_days: TradeDaysTable;
  trade_round_trips: TradeRoundTripsTable;
  trade_trip_groups: TradeTripGroupsTable;
}

export type Db = Kysely<DB>;
export type Trx = Transaction<DB>;
