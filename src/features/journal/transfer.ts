// CSV import and export of an account's trades (DESIGN §14).
import { Readable } from 'node:stream';
import { getAccount, lockAccountWithZones } from '../accounts/service.ts';
import { COLUMNS, csvLine, importKey, readTradeCsv } from './csv.ts';
import { checkTrade, isProblem, sameFill, tradingDayOf, type TradeFields } from './fields.ts';
import { recordTrades, type NewTrade } from './record.ts';
import * as repo from './repo.ts';
import type { ImportReportDto } from './schemas.ts';
import { storedFill, toDto, type JournalDeps } from './service.ts';

const MAX_LISTED = 100;
const EXPORT_PAGE = 5000;

interface Candidate {
  readonly row: number;
  readonly fields: TradeFields;
  /** externalId, or the digest of the row's own fields (csv.ts importKey). */
  readonly importKey: string | null;
}

/**
 * DESIGN §14: the valid rows are stored in one transaction; rows already stored (same externalId and
 * fill, or the same keyed row), or repeated in the file, are duplicates; the rest are rejected with the
 * code a create of the row would get.
 */
export async function importTrades(deps: JournalDeps, userId: string, accountId: string, text: string): Promise<ImportReportDto> {
  await getAccount(deps, userId, accountId);
  const now = deps.clock.now();
  const rows = readTradeCsv(text);
  const rejected: ImportReportDto['rejected'] = [];
  const reject = (row: number, code: string, message: string): void => void rejected.push({ row, code, message });
  const candidates: Candidate[] = [];
  const occurrences = new Map<string, number>();
  for (const { row, trade } of rows) {
    if (trade === undefined) {
      reject(row, 'VALIDATION_ERROR', 'the row does not have as many cells as the header');
      continue;
    }
    const fields = checkTrade(trade, now);
    if (isProblem(fields)) {
      reject(row, 'VALIDATION_ERROR', `${fields.path.slice(1)}: ${fields.message}`);
      continue;
    }
    let key: string | null = null;
    if (fields.externalId === null) {
      const own = [fields.symbol, fields.side, fields.quantity, fields.price, fields.fee, fields.executedAt.toISOString(), fields.note];
      const id = JSON.stringify(own);
      const n = (occurrences.get(id) ?? 0) + 1;
      occurrences.set(id, n);
      key = importKey(own, n);
    }
    candidates.push({ row, fields, importKey: key });
  }
  // The file is checked before the account is locked; ids for the rows, in file order, so that fills
  // at one instant are matched in the order the file lists them.
  const ids = candidates.map(() => deps.ids.uuid()).sort();
  let duplicates = 0;
  const imported = await deps.db.transaction().execute(async (trx) => {
    const { account, timezones } = await lockAccountWithZones(trx, userId, accountId);
    const externalIds = candidates.flatMap((c) => (c.fields.externalId === null ? [] : [c.fields.externalId]));
    const keys = candidates.flatMap((c) => (c.importKey === null ? [] : [c.importKey]));
    const stored = await repo.tradesByKeys(trx, accountId, externalIds, keys);
    const byExternalId = new Map<string, ReturnType<typeof storedFill>>();
    const seenKeys = new Set<string>();
    for (const s of stored) {
      if (s.external_id !== null) byExternalId.set(s.external_id, storedFill(s));
      if (s.import_key !== null) seenKeys.add(s.import_key);
    }
    const added: NewTrade[] = [];
    candidates.forEach((c, i) => {
      const { fields } = c;
      if (fields.externalId !== null) {
        const earlier = byExternalId.get(fields.externalId);
        if (earlier !== undefined) {
          if (sameFill(earlier, fields)) duplicates++;
          else reject(c.row, 'TRADE_EXTERNAL_ID_REUSED', `externalId ${fields.externalId.slice(0, 64)} is already on a trade with other fields`);
          return;
        }
        byExternalId.set(fields.externalId, fields);
      } else if (c.importKey !== null) {
        if (seenKeys.has(c.importKey)) {
          duplicates++;
          return;
        }
        seenKeys.add(c.importKey);
      }
      added.push({
        ...fields,
        id: ids[i] ?? deps.ids.uuid(),
        tradingDay: tradingDayOf(timezones, account.timezone, fields.executedAt),
        importKey: c.importKey,
        createdAt: now,
      });
    });
    if (added.length > 0) await recordTrades(trx, accountId, added, []);
    return added.length;
  });
  rejected.sort((a, b) => a.row - b.row);
  return { imported, duplicates, rejectedCount: rejected.length, rejected: rejected.slice(0, MAX_LISTED) };
}

/** DESIGN §14: the account's trades as CSV in the import's columns, oldest first, read a page at a time. */
export async function exportTrades(deps: JournalDeps, userId: string, accountId: string): Promise<Readable> {
  await getAccount(deps, userId, accountId);
  async function* lines(): AsyncGenerator<string> {
    yield csvLine(COLUMNS);
    let after: { executedAt: Date; id: string } | undefined;
    for (;;) {
      const page = await repo.tradesAfter(deps.db, accountId, after, EXPORT_PAGE);
      let chunk = '';
      for (const row of page) {
        const t = toDto(row);
        chunk += csvLine([t.symbol, t.side, t.quantity, t.price, t.fee, t.executedAt, t.externalId ?? '', t.note ?? '']);
      }
      if (chunk !== '') yield chunk;
      const last = page.at(-1);
      if (page.length < EXPORT_PAGE || !last) return;
      after = { executedAt: last.executed_at, id: last.id };
    }
  }
  return Readable.from(lines());
}
