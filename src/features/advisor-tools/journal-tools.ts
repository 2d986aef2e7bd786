// The advisor's journal tools (DESIGN §14): the trader's own journal, trades and position sizes, read
// through the journal feature. An account is named in words; one that names none, or several, is a
// result the model can answer from (it lists the accounts), never a stream error.
import type { Deps } from '../../deps.ts';
import { isBoundedDay } from '../../http/dates.ts';
import { AppError } from '../../http/errors.ts';
import { listAccounts, matchAccounts } from '../accounts/service.ts';
import type { AccountDto } from '../accounts/schemas.ts';
import { FUTURES_MULTIPLIERS, futuresRoot } from '../journal/instruments.ts';
import { exact, positionSize, type Exact } from '../journal/position-size.ts';
import { listRoundTrips, report } from '../journal/reports.ts';
import { balance, journal, listTrades } from '../journal/service.ts';
import type { JournalInput, PositionSizeInput, ReportInput, RoundTripsInput, TradesInput } from './definitions.ts';

/** get_journal shows this many of the range's most recent days. */
const JOURNAL_DAYS = 60;
const LISTED_ACCOUNTS = 20;
const DEFAULT_TRADES = 50;

type JournalToolDeps = Pick<Deps, 'db' | 'clock' | 'ids' | 'vault'>;

/** A tool call refused for what it asked: told to the model as a result with this code. */
export class ToolRefusal extends Error {
  readonly code: 'ACCOUNT_NOT_FOUND' | 'ACCOUNT_AMBIGUOUS' | 'TOOL_INVALID_ARGUMENTS';
  constructor(code: ToolRefusal['code'], message: string) {
    super(message);
    this.code = code;
  }
}

const named = (accounts: readonly AccountDto[]): string =>
  accounts
    .slice(0, LISTED_ACCOUNTS)
    .map((a) => `"${a.name}" (id ${a.id})`)
    .join(', ') + (accounts.length > LISTED_ACCOUNTS ? `, and ${accounts.length - LISTED_ACCOUNTS} more` : '');

async function resolveAccount(deps: JournalToolDeps, userId: string, text: string | undefined): Promise<AccountDto> {
  const accounts = await listAccounts(deps, userId);
  if (accounts.length === 0) throw new ToolRefusal('ACCOUNT_NOT_FOUND', 'the user has no trading account in this journal yet');
  if (text === undefined) {
    if (accounts.length === 1) return accounts[0] as AccountDto;
    throw new ToolRefusal('ACCOUNT_AMBIGUOUS', `the user has ${accounts.length} accounts; call again with "account" set to one of: ${named(accounts)}`);
  }
  const matches = matchAccounts(accounts, text);
  if (matches.length === 1) return matches[0] as AccountDto;
  if (matches.length === 0)
    throw new ToolRefusal('ACCOUNT_NOT_FOUND', `no account of the user is named "${text.slice(0, 100)}"; their accounts: ${named(accounts)}`);
  throw new ToolRefusal(
    'ACCOUNT_AMBIGUOUS',
    `"${text.slice(0, 100)}" matches ${matches.length} accounts: ${named(matches)}; call again with one of these names or ids`,
  );
}

function checkDays(from: string, to: string): void {
  if (!isBoundedDay(from) || !isBoundedDay(to))
    throw new ToolRefusal('TOOL_INVALID_ARGUMENTS', '/from and /to must be real calendar dates (YYYY-MM-DD), 1970–9999');
}

/** The journal service's own refusals of a range (from after to, over three years) are the model's arguments. */
async function asArguments<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof AppError && err.code === 'VALIDATION_ERROR') throw new ToolRefusal('TOOL_INVALID_ARGUMENTS', err.message);
    throw err;
  }
}

const accountOf = (a: AccountDto) => ({ name: a.name, id: a.id, currency: a.currency });

export async function getJournal(deps: JournalToolDeps, userId: string, args: JournalInput): Promise<Record<string, unknown>> {
  checkDays(args.from, args.to);
  const account = await resolveAccount(deps, userId, args.account);
  const j = await asArguments(() => journal(deps, userId, account.id, { from: args.from, to: args.to }));
  const omitted = Math.max(0, j.days.length - JOURNAL_DAYS);
  // `days` is the result's first list: the 16 KB cap shortens it from its oldest end (cap.ts).
  return {
    account: accountOf(account),
    from: j.from,
    to: j.to,
    totals: j.totals,
    days: j.days.slice(omitted),
    ...(omitted > 0 ? { daysOmitted: omitted } : {}),
    openPositions: j.openPositions,
    balance: j.balance,
  };
}

export async function listTradesTool(deps: JournalToolDeps, userId: string, args: TradesInput): Promise<Record<string, unknown>> {
  checkDays(args.from, args.to);
  const account = await resolveAccount(deps, userId, args.account);
  const page = await asArguments(() =>
    listTrades(deps, userId, account.id, { from: args.from, to: args.to, symbol: args.symbol, limit: args.limit ?? DEFAULT_TRADES }),
  );
  return {
    account: accountOf(account),
    trades: page.items.map((t) => ({
      symbol: t.symbol,
      side: t.side,
      quantity: t.quantity,
      price: t.price,
      fee: t.fee,
      assetClass: t.assetClass,
      multiplier: t.multiplier,
      stopPrice: t.stopPrice,
      executedAt: t.executedAt,
      tradingDay: t.tradingDay,
      note: t.note,
      tags: t.tags,
    })),
    more: page.nextCursor !== null,
  };
}

/** A JSON number as the decimal the model wrote (the shortest that reads back as it; exponents spelled out). */
export function decimalOf(n: number): Exact {
  const [mantissa = '0', exponent = '0'] = String(n).split('e');
  const m = exact(mantissa);
  if (m === undefined) throw new ToolRefusal('TOOL_INVALID_ARGUMENTS', `${n} is not a decimal number`);
  const shift = m.places - Number(exponent);
  return shift >= 0 ? { units: m.units, places: shift } : { units: m.units * 10n ** BigInt(-shift), places: 0 };
}

/** The multiplier a position is sized at: given, else a future's by its root (ES 50), else 1. */
function multiplierOf(args: PositionSizeInput): Exact {
  if (args.multiplier !== undefined) return decimalOf(args.multiplier);
  const root = args.symbol === undefined ? undefined : futuresRoot(args.symbol);
  const table = root === undefined ? undefined : FUTURES_MULTIPLIERS[root];
  return (table === undefined ? undefined : exact(table)) ?? { units: 1n, places: 0 };
}

export async function positionSizeTool(deps: JournalToolDeps, userId: string, args: PositionSizeInput): Promise<Record<string, unknown>> {
  const account = args.balance === undefined || args.account !== undefined ? await resolveAccount(deps, userId, args.account) : undefined;
  const balanceText = args.balance === undefined ? exact(await balance(deps, account as AccountDto)) : decimalOf(args.balance);
  if (balanceText === undefined) throw new Error('the journal wrote a balance that is not a decimal');
  const size = positionSize(decimalOf(args.entry), decimalOf(args.stop), decimalOf(args.riskPercent), balanceText, multiplierOf(args));
  if (size === undefined) throw new ToolRefusal('TOOL_INVALID_ARGUMENTS', '/stop must differ from /entry (no risk per share)');
  return { ...size, ...(account ? { account: accountOf(account) } : {}) };
}

const DEFAULT_ROUND_TRIPS = 50;

export async function roundTripsTool(deps: JournalToolDeps, userId: string, args: RoundTripsInput): Promise<Record<string, unknown>> {
  checkDays(args.from, args.to);
  const account = await resolveAccount(deps, userId, args.account);
  const page = await asArguments(() =>
    listRoundTrips(deps, userId, account.id, {
      from: args.from,
      to: args.to,
      symbol: args.symbol,
      tag: args.tag,
      side: args.side,
      limit: args.limit ?? DEFAULT_ROUND_TRIPS,
    }),
  );
  // `roundTrips` is the result's first list: the 16 KB cap shortens it from its end (the oldest).
  return {
    account: accountOf(account),
    // The closing fill's id means nothing to the model.
    roundTrips: page.items.map((trip) => Object.fromEntries(Object.entries(trip).filter(([k]) => k !== 'id'))),
    more: page.nextCursor !== null,
  };
}

export async function journalReportTool(deps: JournalToolDeps, userId: string, args: ReportInput): Promise<Record<string, unknown>> {
  checkDays(args.from, args.to);
  const account = await resolveAccount(deps, userId, args.account);
  const r = await asArguments(() => report(deps, userId, account.id, { from: args.from, to: args.to, by: args.by, exclude: args.exclude }));
  // `groups` is the result's first list: the 16 KB cap shortens it first.
  return { account: accountOf(account), from: r.from, to: r.to, by: r.by, groups: r.groups, totals: r.totals, exclude: r.exclude };
}
