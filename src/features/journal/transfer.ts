// Import of broker files and export of an account's trades (DESIGN §14, §17).
import { Readable } from 'node:stream';
import { AppError } from '../../http/errors.ts';
import { accountWithZones, lockAccountWithZones } from '../accounts/service.ts';
import { canonicalTimezone, instantOfWallTime, zoneAt, type TimezoneChange } from '../accounts/timezones.ts';
import { readBrokerFile, type BrokerTrade } from './brokers/index.ts';
import { csvLine } from './csv.ts';
import { checkTrade, isProblem, sameFill, tradingDayOf, type FillFields, type TradeFields } from './fields.ts';
import { recordTrades, type NewTrade } from './record.ts';
import * as repo from './repo.ts';
import type { ExportQueryInput, ImportQueryInput, ImportReportDto } from './schemas.ts';
import { getAccount } from '../accounts/service.ts';
import { newTradeDto, storedFill, toDto, type JournalDeps } from './service.ts';

const MAX_LISTED = 100;
const PREVIEW = 20;
const EXPORT_PAGE = 5000;

/** The export's columns, in order: the generic layout reads them all back. */
const EXPORT_COLUMNS = [
  'symbol',
  'side',
  'quantity',
  'price',
  'fee',
  'executedAt',
  'externalId',
  'note',
  'tags',
  'assetClass',
  'multiplier',
  'stopPrice',
] as const;

interface Candidate {
  readonly row: number;
  readonly fields: TradeFields;
  /** Without externalId: the row's own fields, and how many equal rows came before it in the file (from 1). */
  readonly content: string | null;
  readonly occurrence: number;
}

/** A broker's timestamp with no offset: a wall-clock time (`2024-01-05T10:30:00`), read in a zone. */
const WALL_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?)$/;

interface ZoneChoice {
  /** ?timezone=, canonical; else the account's history. */
  readonly given: string | undefined;
  readonly history: readonly TimezoneChange[];
  readonly fallback: string;
  /** The zones wall-clock times were read in, latest last. */
  readonly used: string[];
}

/** The row's instant: as written when it has an offset, else its wall-clock time in the chosen zone. */
function instantText(executedAt: string, zones: ZoneChoice): string {
  const m = WALL_TIME.exec(executedAt);
  if (!m) return executedAt;
  const wall = Date.parse(`${m[1]}Z`);
  if (Number.isNaN(wall)) return executedAt;
  // The zone in force "at that moment": the wall time read as UTC finds it, hours off only beside a change.
  const zone = zones.given ?? zoneAt(zones.history, wall) ?? zones.fallback;
  const used = zones.used.indexOf(zone);
  if (used >= 0) zones.used.splice(used, 1);
  zones.used.push(zone);
  return new Date(instantOfWallTime(wall, zone)).toISOString();
}

function zoneChoice(timezone: string | undefined, history: readonly TimezoneChange[], fallback: string): ZoneChoice {
  if (timezone === undefined) return { given: undefined, history, fallback, used: [] };
  const given = canonicalTimezone(timezone);
  if (given === undefined)
    throw new AppError('VALIDATION_ERROR', `timezone ${timezone.slice(0, 64)} is not an IANA zone`, {
      details: [{ path: '/timezone', message: 'must be an IANA timezone name' }],
    });
  return { given, history, fallback, used: [] };
}

/** What makes a fill without externalId the same fill: everything but its tags and stop. */
const contentOf = (f: FillFields & { note: string | null }): string =>
  JSON.stringify([f.symbol, f.side, f.quantity, f.price, f.fee, f.executedAt.toISOString(), f.note, f.assetClass, f.multiplier]);

/**
 * DESIGN §14, §17: the file's layout is detected (or `format`), its rows read; the valid ones are stored
 * in one transaction; rows already stored (same externalId and fill, or the same keyed row), or
 * repeated in the file, are duplicates; rows the broker marks as no execution are skipped; the rest
 * are rejected with the code a create of the row would get. `dryRun` writes nothing and previews.
 */
export async function importTrades(deps: JournalDeps, userId: string, accountId: string, text: string, q: ImportQueryInput): Promise<ImportReportDto> {
  const { account, timezones } = await accountWithZones(deps.db, userId, accountId);
  const zones = zoneChoice(q.timezone, timezones, account.timezone);
  const file = readBrokerFile(text, q.format);
  const now = deps.clock.now();
  const rejected: ImportReportDto['rejected'] = [];
  const reject = (row: number, code: string, message: string): void => void rejected.push({ row, code, message });
  const candidates: Candidate[] = [];
  const occurrences = new Map<string, number>();
  let skipped = 0;
  for (const r of file.rows) {
    if (r.kind === 'skipped') {
      skipped++;
      continue;
    }
    if (r.kind === 'invalid') {
      reject(r.row, 'VALIDATION_ERROR', r.message);
      continue;
    }
    const trade: BrokerTrade = r.trade;
    const fields = checkTrade({ ...trade, executedAt: instantText(trade.executedAt, zones) }, now);
    if (isProblem(fields)) {
      reject(r.row, 'VALIDATION_ERROR', `${fields.path.slice(1)}: ${fields.message}`);
      continue;
    }
    const content = fields.externalId === null ? contentOf(fields) : null;
    const occurrence = content === null ? 0 : (occurrences.get(content) ?? 0) + 1;
    if (content !== null) occurrences.set(content, occurrence);
    candidates.push({ row: r.row, fields, content, occurrence });
  }
  // The file is checked before the account is locked; ids for the rows, in file order, so that fills
  // at one instant are matched in the order the file lists them.
  const ids = candidates.map(() => deps.ids.uuid()).sort();
  let duplicates = 0;
  const dryRun = q.dryRun === true;
  const added = await deps.db.transaction().execute(async (trx) => {
    const locked = await lockAccountWithZones(trx, userId, accountId);
    const externalIds = candidates.flatMap((c) => (c.fields.externalId === null ? [] : [c.fields.externalId]));
    const keyless = candidates.flatMap((c) => (c.content === null ? [] : [c.fields]));
    const [stored, sameAt] = await Promise.all([repo.tradesByExternalIds(trx, accountId, externalIds), repo.tradesAt(trx, accountId, keyless)]);
    const byExternalId = new Map<string, FillFields>();
    for (const s of stored) if (s.external_id !== null) byExternalId.set(s.external_id, storedFill(s));
    // A row without externalId is the same fill as a stored one with its content (§14): the file's n-th
    // such row is a duplicate while the account holds n of them — whether imported or created.
    const storedCount = new Map<string, number>();
    for (const s of sameAt) {
      const content = contentOf({ ...storedFill(s), note: s.note });
      storedCount.set(content, (storedCount.get(content) ?? 0) + 1);
    }
    const fresh: NewTrade[] = [];
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
      } else if (c.content !== null && c.occurrence <= (storedCount.get(c.content) ?? 0)) {
        duplicates++;
        return;
      }
      fresh.push({
        ...fields,
        id: ids[i] ?? deps.ids.uuid(),
        tradingDay: tradingDayOf(locked.timezones, locked.account.timezone, fields.executedAt),
        importKey: null,
        createdAt: now,
      });
    });
    if (fresh.length > 0 && !dryRun) await recordTrades(trx, accountId, { timezones: locked.timezones, fallback: locked.account.timezone }, fresh, []);
    return fresh;
  });
  rejected.sort((a, b) => a.row - b.row);
  return {
    format: file.format,
    timezone: zones.used.at(-1) ?? null,
    dryRun,
    imported: added.length,
    duplicates,
    skipped,
    rejectedCount: rejected.length,
    rejected: rejected.slice(0, MAX_LISTED),
    ...(dryRun ? { preview: added.slice(0, PREVIEW).map((t) => newTradeDto(accountId, t)) } : {}),
  };
}

/**
 * Tags in one cell: `;`-separated, or a JSON array when `;`-separation would not read back the same (a tag
 * holding `;`, starting with `[`, or with spaces at an end); the generic layout reads both.
 */
const tagsCell = (tags: readonly string[]): string =>
  tags.some((t) => t.includes(';') || t.startsWith('[') || t.trim() !== t) ? JSON.stringify(tags) : tags.join(';');

/** DESIGN §14, §17: the account's trades (within the list's filters) as CSV in the generic layout, oldest first, a page at a time. */
export async function exportTrades(deps: JournalDeps, userId: string, accountId: string, q: ExportQueryInput = {}): Promise<Readable> {
  await getAccount(deps, userId, accountId);
  if (q.from !== undefined && q.to !== undefined && q.from > q.to)
    throw new AppError('VALIDATION_ERROR', '/from: must not be after `to`', { details: [{ path: '/from', message: 'must not be after `to`' }] });
  const filter = { from: q.from, to: q.to, symbol: q.symbol?.toUpperCase() };
  async function* lines(): AsyncGenerator<string> {
    yield csvLine(EXPORT_COLUMNS);
    let after: { executedAt: Date; id: string } | undefined;
    for (;;) {
      const page = await repo.tradesAfter(deps.db, accountId, after, EXPORT_PAGE, filter);
      let chunk = '';
      for (const row of page) {
        const t = toDto(row);
        chunk += csvLine([
          t.symbol,
          t.side,
          t.quantity,
          t.price,
          t.fee,
          t.executedAt,
          t.externalId ?? '',
          t.note ?? '',
          tagsCell(t.tags),
          t.assetClass,
          t.multiplier,
          t.stopPrice ?? '',
        ]);
      }
      if (chunk !== '') yield chunk;
      const last = page.at(-1);
      if (page.length < EXPORT_PAGE || !last) return;
      after = { executedAt: last.executed_at, id: last.id };
    }
  }
  return Readable.from(lines());
}
