import type { ColumnType, Generated, Kysely, Transaction } from 'kysely';

/** timestamptz: read as Date, written as Date (or defaulted by the database). */
export type Timestamp = ColumnType<Date, Date | undefined, Date>;

export interface UsersTable {
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
  currency: string;
  timezone: string;
  brokerage_id: string | null;
  /** numeric: read as a decimal string, never a float. */
  starting_balance: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface AccountTimezonesTable {
  account_id: string;
  timezone: string;
  effective_from: Date;
}

/** One row per admitted hit of a rolling-window limit (migration 0002-platform). */
export interface RateLimitHitsTable {
  /** The rule name. */
  bucket: string;
  subject: string;
  at: Date;
}

/** The one live stream a user may have; free once `expires_at` has passed. */
export interface StreamLeasesTable {
  user_id: string;
  token: string;
  expires_at: Date;
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
}

export type Db = Kysely<DB>;
export type Trx = Transaction<DB>;
