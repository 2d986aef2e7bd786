// DESIGN §17: the round trips of an account, and reports by group with their what-ifs, read from the
// round trips kept on write (trade_round_trips).
import { makeCursor } from '../../http/cursor.ts';
import { accountWithZones, getAccount } from '../accounts/service.ts';
import { exclusionsOf, GROUP_ORDER } from './exclusions.ts';
import * as repo from './repo.ts';
import { groupOf, groupTotals, noTrips, roundTripDto } from './round-trips.ts';
import type { ReportDto, ReportQueryInput, RoundTripDto, RoundTripQueryInput } from './schemas.ts';
import { cursorPosition, invalid, journalRange, type JournalDeps } from './service.ts';

const DEFAULT_PAGE = 50;

/** A page of round trips, newest close first; keyset cursor on (closedAt, id). */
export async function listRoundTrips(
  deps: JournalDeps,
  userId: string,
  accountId: string,
  q: RoundTripQueryInput,
): Promise<{ items: RoundTripDto[]; nextCursor: string | null }> {
  await getAccount(deps, userId, accountId);
  if (q.from !== undefined && q.to !== undefined && q.from > q.to) throw invalid({ path: '/from', message: 'must not be after `to`' });
  const limit = q.limit ?? DEFAULT_PAGE;
  const position = q.cursor === undefined ? undefined : cursorPosition(deps, userId, 'round-trips', accountId, q.cursor);
  const before = position === undefined ? undefined : { closedAt: position.at, id: position.id };
  const rows = await repo.listRoundTrips(deps.db, accountId, {
    from: q.from,
    to: q.to,
    symbol: q.symbol?.toUpperCase(),
    tag: q.tag,
    side: q.side,
    before,
    limit: limit + 1,
  });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map(roundTripDto),
    nextCursor: rows.length > limit && last ? makeCursor(deps.vault, userId, 'round-trips', [accountId, last.closed_at.getTime(), last.id]) : null,
  };
}

function ordered<T extends { key: string | null }>(by: ReportQueryInput['by'], groups: T[]): T[] {
  const order = GROUP_ORDER[by];
  const rank = (k: string | null): number => (k === null ? Number.MAX_SAFE_INTEGER : (order?.indexOf(k) ?? -1));
  return groups.sort((a, b) => {
    if (order !== undefined || a.key === null || b.key === null) return rank(a.key) - rank(b.key);
    return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  });
}

/** DESIGN §17: one row per group of the round trips closed in the range, with the totals over all of them. */
export async function report(deps: JournalDeps, userId: string, accountId: string, q: ReportQueryInput): Promise<ReportDto> {
  const { account, timezones } = await accountWithZones(deps.db, userId, accountId);
  const { from, to } = journalRange(deps, account, timezones, q);
  const exclude = exclusionsOf(q.exclude ?? []);
  const filter = { from, to, symbol: q.symbol?.toUpperCase(), exclude: exclude.items };
  const [byGroup, [whole]] = await Promise.all([repo.tripTotals(deps.db, accountId, filter, q.by), repo.tripTotals(deps.db, accountId, filter, null)]);
  return {
    accountId,
    currency: account.currency,
    from,
    to,
    by: q.by,
    exclude: exclude.text,
    totals: whole === undefined ? noTrips() : groupTotals(groupOf(whole)),
    groups: ordered(
      q.by,
      byGroup.map((row) => ({ key: row.key, totals: groupTotals(groupOf(row)) })),
    ),
  };
}

/** How many trades an account holds (what deleting it takes with it). */
export async function countTrades(deps: JournalDeps, userId: string, accountId: string): Promise<{ count: number }> {
  await getAccount(deps, userId, accountId);
  return { count: await repo.countTrades(deps.db, accountId) };
}
