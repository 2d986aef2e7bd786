import type { Deps } from '../../deps.ts';
import { UNIQUE_VIOLATION, pgErrorCode } from '../../db/create-db.ts';
import type { Db, Trx } from '../../db/types.ts';
import { AppError } from '../../http/errors.ts';
import * as repo from './repo.ts';
import type { AccountDto, BrokerageDto, CreateAccountInput, UpdateAccountInput } from './schemas.ts';
import { accountNameKey } from './name-key.ts';
import { calendarDate, canonicalTimezone, zoneAt, type TimezoneChange } from './timezones.ts';
import { isFourDigitDay, LAST_DAY } from '../../http/dates.ts';

type AccountDeps = Pick<Deps, 'db' | 'clock' | 'ids'>;

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

function toDto(row: repo.AccountRow): AccountDto {
  return {
    id: row.id,
    name: row.name,
    currency: row.currency,
    timezone: row.timezone,
    brokerageId: row.brokerage_id,
    startingBalance: row.starting_balance,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function brokerageDto(row: repo.BrokerageRow): BrokerageDto {
  return { id: row.id, name: row.name, createdAt: row.created_at.toISOString() };
}

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `${path}: ${message}`, { details: [{ path, message }] });
}

/** The display name (trimmed) and the key it is unique by among the user's accounts (name-key.ts). */
function normaliseName(name: string): { name: string; key: string } {
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > 100) throw invalid('/name', 'must be 1 to 100 characters after trimming');
  const key = accountNameKey(trimmed);
  if (key === '') throw invalid('/name', 'must contain a visible character');
  return { name: trimmed, key };
}

function normaliseCurrency(currency: string): string {
  const upper = currency.toUpperCase();
  if (!CURRENCIES.has(upper)) throw invalid('/currency', 'must be an ISO 4217 currency code');
  return upper;
}

function normaliseTimezone(timezone: string): string {
  const canonical = canonicalTimezone(timezone);
  if (!canonical) throw invalid('/timezone', 'must be an IANA time zone name');
  return canonical;
}

/** Spec 4.4 rule 3: another user's brokerage is FORBIDDEN; a missing one is not found. */
async function checkBrokerage(trx: Trx, userId: string, brokerageId: string): Promise<void> {
  const owner = await repo.brokerageOwner(trx, brokerageId);
  if (owner === undefined) throw new AppError('BROKERAGE_NOT_FOUND', 'brokerage not found');
  if (owner !== userId) throw new AppError('FORBIDDEN', 'brokerage belongs to another user');
}

async function uniqueName<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (pgErrorCode(err) === UNIQUE_VIOLATION) throw new AppError('ACCOUNT_NAME_TAKEN', 'an account with this name already exists');
    throw err;
  }
}

export async function listAccounts(deps: AccountDeps, userId: string): Promise<AccountDto[]> {
  return (await repo.listAccounts(deps.db, userId)).map(toDto);
}

/**
 * The accounts a name or id given in words means (the advisor's tools): the one with that id, else the
 * one whose name a reader could not tell from it (name-key.ts), else every one whose name contains it.
 */
export function matchAccounts(accounts: readonly AccountDto[], text: string): AccountDto[] {
  const byId = accounts.find((a) => a.id === text.trim().toLowerCase());
  if (byId) return [byId];
  const key = accountNameKey(text);
  const same = accounts.find((a) => accountNameKey(a.name) === key);
  if (same) return [same];
  return key === '' ? [] : accounts.filter((a) => accountNameKey(a.name).includes(key));
}

export async function getAccount(deps: AccountDeps, userId: string, id: string): Promise<AccountDto> {
  const row = await repo.findAccount(deps.db, userId, id);
  if (!row) throw new AppError('ACCOUNT_NOT_FOUND', 'account not found');
  return toDto(row);
}

export async function createAccount(deps: AccountDeps, userId: string, input: CreateAccountInput): Promise<AccountDto> {
  const { name, key } = normaliseName(input.name);
  const currency = normaliseCurrency(input.currency);
  const timezone = normaliseTimezone(input.timezone);
  const now = deps.clock.now();
  const row = await uniqueName(() =>
    deps.db.transaction().execute(async (trx) => {
      if (input.brokerageId) await checkBrokerage(trx, userId, input.brokerageId);
      const inserted = await repo.insertAccount(trx, {
        id: deps.ids.uuid(),
        user_id: userId,
        name,
        name_key: key,
        currency,
        timezone,
        brokerage_id: input.brokerageId ?? null,
        starting_balance: input.startingBalance,
        created_at: now,
        updated_at: now,
      });
      await repo.insertTimezoneChange(trx, inserted.id, timezone, now);
      return inserted;
    }),
  );
  return toDto(row);
}

/** Spec 4.4: partial update of name, currency, brokerageId, timezone; all or nothing. */
export async function updateAccount(deps: AccountDeps, userId: string, id: string, input: UpdateAccountInput): Promise<AccountDto> {
  const name = input.name === undefined ? undefined : normaliseName(input.name);
  const currency = input.currency === undefined ? undefined : normaliseCurrency(input.currency);
  const timezone = input.timezone === undefined ? undefined : normaliseTimezone(input.timezone);
  const row = await uniqueName(() =>
    deps.db.transaction().execute(async (trx) => {
      const current = await repo.lockAccount(trx, userId, id);
      if (!current) throw new AppError('ACCOUNT_NOT_FOUND', 'account not found');
      if (input.brokerageId) await checkBrokerage(trx, userId, input.brokerageId);
      const now = deps.clock.now();
      const patch = {
        ...(name !== undefined ? { name: name.name, name_key: name.key } : {}),
        ...(currency !== undefined ? { currency } : {}),
        ...(timezone !== undefined ? { timezone } : {}),
        ...(input.brokerageId !== undefined ? { brokerage_id: input.brokerageId } : {}),
      };
      if (Object.keys(patch).length === 0) return current;
      // Rule 2: a new zone applies from now on; earlier instants keep the zone they had.
      if (timezone !== undefined && timezone !== current.timezone) await repo.insertTimezoneChange(trx, id, timezone, now);
      return repo.updateAccount(trx, id, { ...patch, updated_at: now });
    }),
  );
  return toDto(row);
}

export async function deleteAccount(deps: AccountDeps, userId: string, id: string): Promise<void> {
  if (!(await repo.deleteAccount(deps.db, userId, id))) throw new AppError('ACCOUNT_NOT_FOUND', 'account not found');
}

export async function tradingDay(deps: AccountDeps, userId: string, id: string, at: Date | undefined): Promise<{ tradingDay: string; timezone: string }> {
  const { account, timezones } = await accountWithZones(deps.db, userId, id);
  const instant = at ?? deps.clock.now();
  const timezone = zoneAt(timezones, instant.getTime()) ?? account.timezone;
  const day = calendarDate(instant, timezone);
  // The last hours of 9999 (UTC) fall on 10000-01-01 east of UTC: a day never written (DESIGN §9, §10).
  if (!isFourDigitDay(day)) throw invalid('/at', `falls on a day after ${LAST_DAY} in the account’s timezone`);
  return { tradingDay: day, timezone };
}

/** The caller's account and its timezone history (oldest first), for work on its trading days. */
export interface AccountWithZones {
  readonly account: AccountDto;
  readonly timezones: readonly TimezoneChange[];
}

async function withZones(db: Db | Trx, row: repo.AccountRow | undefined): Promise<AccountWithZones> {
  if (!row) throw new AppError('ACCOUNT_NOT_FOUND', 'account not found');
  const history = await repo.timezoneHistory(db, row.id);
  return { account: toDto(row), timezones: history.map((h) => ({ timezone: h.timezone, from: h.effective_from })) };
}

/** The caller's account with its zones; 404 ACCOUNT_NOT_FOUND when it is not theirs. */
export async function accountWithZones(db: Db, userId: string, id: string): Promise<AccountWithZones> {
  return withZones(db, await repo.findAccount(db, userId, id));
}

/**
 * The same, with the account's row locked until `trx` ends: the journal's writes to one account take
 * it, so they apply one after another, and a delete of the account waits for them (or they find it gone).
 */
export async function lockAccountWithZones(trx: Trx, userId: string, id: string): Promise<AccountWithZones> {
  return withZones(trx, await repo.lockAccount(trx, userId, id));
}

export async function listBrokerages(deps: AccountDeps, userId: string): Promise<BrokerageDto[]> {
  return (await repo.listBrokerages(deps.db, userId)).map(brokerageDto);
}

export async function createBrokerage(deps: AccountDeps, userId: string, name: string): Promise<BrokerageDto> {
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > 100) throw invalid('/name', 'must be 1 to 100 characters after trimming');
  const row = await repo.insertBrokerage(deps.db, { id: deps.ids.uuid(), user_id: userId, name: trimmed, created_at: deps.clock.now() });
  return brokerageDto(row);
}

/** Deleting a brokerage unlinks the accounts that pointed at it (they keep everything else). */
export async function deleteBrokerage(deps: AccountDeps, userId: string, id: string): Promise<void> {
  if (!(await repo.deleteBrokerage(deps.db, userId, id))) throw new AppError('BROKERAGE_NOT_FOUND', 'brokerage not found');
}
