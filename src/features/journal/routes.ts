import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { IdParams, NoContent, responses } from '../../http/schemas.ts';
import { MAX_CSV_BYTES } from './csv.ts';
import { decodeTradeFile, IMPORT_FORMATS } from './brokers/index.ts';
import { countTrades, listRoundTrips, report } from './reports.ts';
import {
  CreateTradeBody,
  CsvBody,
  ExportQuery,
  ImportFormats,
  ImportQuery,
  ImportReport,
  Journal,
  JournalQuery,
  Report,
  ReportQuery,
  RoundTripPage,
  RoundTripQuery,
  Trade,
  TradeCount,
  TradeListQuery,
  TradePage,
  TradeParams,
  UpdateTradeBody,
} from './schemas.ts';
import * as service from './service.ts';
import { exportTrades, importTrades } from './transfer.ts';

export async function journalRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['journal'];

  app.post(
    '/accounts/:id/trades',
    {
      schema: {
        operationId: 'createTrade',
        tags,
        summary: 'Record a trade (a fill) on an account',
        description:
          '201 with the new trade. With an externalId already on the account: the same fill → 200 with the stored trade, nothing added; ' +
          'other fields → 409 TRADE_EXTERNAL_ID_REUSED. tradingDay is the date of executedAt in the account’s timezone in force at that instant.',
        params: IdParams,
        body: CreateTradeBody,
        response: responses({ 200: Trade, 201: Trade }),
      },
    },
    async (req, reply) => {
      const { trade, created } = await service.createTrade(deps, req.user.id, req.params.id, req.body);
      return reply.code(created ? 201 : 200).send(trade);
    },
  );
  app.get(
    '/accounts/:id/trades',
    {
      schema: {
        operationId: 'listTrades',
        tags,
        summary: 'Trades of an account, newest executedAt first',
        description: '`from` / `to` are trading days (inclusive); `cursor` is the previous page’s nextCursor; `limit` 1–200 (default 50).',
        params: IdParams,
        querystring: TradeListQuery,
        response: responses({ 200: TradePage }),
      },
    },
    async (req) => service.listTrades(deps, req.user.id, req.params.id, req.query),
  );
  app.get(
    '/accounts/:id/trades/export',
    {
      schema: {
        operationId: 'exportTrades',
        tags,
        summary: 'The account’s trades as CSV, in the import’s columns, oldest first',
        description: "A cell starting with =, +, -, @ (or a tab or carriage return) is written with a leading ', so a spreadsheet never runs it.",
        params: IdParams,
        querystring: ExportQuery,
        response: responses({ 200: { description: 'text/csv (RFC 4180)', content: { 'text/csv': { schema: Type.Unsafe<Readable>({ type: 'string' }) } } } }),
      },
    },
    async (req, reply) => {
      const body = await exportTrades(deps, req.user.id, req.params.id, req.query);
      return reply.type('text/csv; charset=utf-8').header('content-disposition', `attachment; filename="trades-${req.params.id}.csv"`).send(body);
    },
  );
  app.patch(
    '/accounts/:id/trades/:tradeId',
    {
      schema: {
        operationId: 'updateTrade',
        tags,
        summary: 'Change a trade’s note or tags (nothing else)',
        description: 'Any other field → 400 VALIDATION_ERROR, nothing changed. `note: null` clears the note.',
        params: TradeParams,
        body: UpdateTradeBody,
        response: responses({ 200: Trade }),
      },
    },
    async (req) => service.updateTrade(deps, req.user.id, req.params.id, req.params.tradeId, req.body),
  );
  app.delete(
    '/accounts/:id/trades/:tradeId',
    { schema: { operationId: 'deleteTrade', tags, summary: 'Delete a trade', params: TradeParams, response: responses({ 204: NoContent }) } },
    async (req, reply) => {
      await service.deleteTrade(deps, req.user.id, req.params.id, req.params.tradeId);
      return reply.code(204).send(null);
    },
  );
  app.get(
    '/accounts/:id/journal',
    {
      schema: {
        operationId: 'getJournal',
        tags,
        summary: 'The trading journal of a range of trading days',
        description:
          'FIFO lot matching per symbol over all of the account’s trades; totals and days of the range (at most three years), ' +
          'open positions after the last fill on or before `to`, balance = startingBalance + all-time netPnl. Money exact, half to even at 8 places.',
        params: IdParams,
        querystring: JournalQuery,
        response: responses({ 200: Journal }),
      },
    },
    async (req) => service.journal(deps, req.user.id, req.params.id, req.query),
  );
  app.get(
    '/accounts/:id/trades/count',
    {
      schema: {
        operationId: 'countTrades',
        tags,
        summary: 'How many trades the account holds (what deleting it takes with it)',
        params: IdParams,
        response: responses({ 200: TradeCount }),
      },
    },
    async (req) => countTrades(deps, req.user.id, req.params.id),
  );
  app.get(
    '/accounts/:id/round-trips',
    {
      schema: {
        operationId: 'listRoundTrips',
        tags,
        summary: 'Round trips of an account, newest close first',
        description:
          'A round trip is one symbol’s position from flat back to flat. `from` / `to` are closing trading days (inclusive); `tag` keeps trips ' +
          'with that tag on any fill; rMultiple = netPnl / initialRisk (4 places, null without a stop); `limit` 1–200 (default 50).',
        params: IdParams,
        querystring: RoundTripQuery,
        response: responses({ 200: RoundTripPage }),
      },
    },
    async (req) => listRoundTrips(deps, req.user.id, req.params.id, req.query),
  );
  app.get(
    '/accounts/:id/journal/report',
    {
      schema: {
        operationId: 'getJournalReport',
        tags,
        summary: 'The round trips of a range by symbol, tag, side, weekday, hour or hold time, with what-ifs',
        description:
          'One group per key with the journal’s totals (plus averageR, expectancyR) over the round trips that closed in the range; ' +
          '`exclude` removes round trips first (the what-if).',
        params: IdParams,
        querystring: ReportQuery,
        response: responses({ 200: Report }),
      },
    },
    async (req) => report(deps, req.user.id, req.params.id, req.query),
  );
  app.get(
    '/journal/import-formats',
    {
      schema: {
        operationId: 'listImportFormats',
        tags,
        summary: 'The trade-file layouts the import reads, with the columns each reads',
        response: responses({ 200: ImportFormats }),
      },
    },
    async () => ({ formats: IMPORT_FORMATS.map((f) => ({ id: f.id, name: f.name, how: f.how, columns: [...f.columns] })) }),
  );
  await app.register(csvImportRoute, { deps });
}

/**
 * Its own scope: here, and only here, a file body of up to 5 MiB is read — `text/csv`, `text/plain`, or
 * `application/vnd.ms-excel` (what Windows browsers send for a `.csv`) — and decoded to text (UTF-8,
 * UTF-16 with a BOM, else Windows-1252: DESIGN §17).
 */
async function csvImportRoute(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser(
    ['text/csv', 'text/plain', 'application/vnd.ms-excel'],
    { parseAs: 'buffer', bodyLimit: MAX_CSV_BYTES },
    (_req, body: Buffer, done) => {
      done(null, decodeTradeFile(body));
    },
  );
  app.post(
    '/accounts/:id/trades/import',
    {
      bodyLimit: MAX_CSV_BYTES,
      schema: {
        operationId: 'importTrades',
        tags: ['journal'],
        summary: 'Import trades from a broker’s file or the generic CSV',
        description:
          'Body text/csv, text/plain or application/vnd.ms-excel, at most 5 MiB (else 413 PAYLOAD_TOO_LARGE) and 50,000 data rows (else 400 ' +
          'VALIDATION_ERROR); UTF-8 (BOM or not), UTF-16 with BOM, else Windows-1252. The layout is detected from the header, or ?format= ' +
          '(GET /api/journal/import-formats). A timestamp without an offset is read in ?timezone=, else the account’s zone in force then. ' +
          'Valid rows are imported in one transaction; rows already stored are duplicates (a row without externalId is the same fill as a ' +
          'stored one with the same fields, so importing a file twice adds nothing); rows the broker marks as no execution are skipped; ' +
          'invalid rows are reported by row with the code a create would get (at most 100 listed). ?dryRun=true: the report and the first 20 ' +
          'trades, nothing written. Not CSV, or no layout recognises the header → 400 VALIDATION_ERROR.',
        params: IdParams,
        querystring: ImportQuery,
        consumes: ['text/csv', 'text/plain', 'application/vnd.ms-excel'],
        body: CsvBody,
        response: responses({ 200: ImportReport }),
      },
    },
    async (req) => importTrades(deps, req.user.id, req.params.id, req.body, req.query),
  );
}
