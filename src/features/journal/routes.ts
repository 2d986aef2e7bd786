import { isUtf8 } from 'node:buffer';
import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { AppError } from '../../http/errors.ts';
import { IdParams, NoContent, responses } from '../../http/schemas.ts';
import { MAX_CSV_BYTES } from './csv.ts';
import { CreateTradeBody, CsvBody, ImportReport, Journal, JournalQuery, Trade, TradeListQuery, TradePage, TradeParams, UpdateTradeBody } from './schemas.ts';
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
        response: responses({ 200: { description: 'text/csv (RFC 4180)', content: { 'text/csv': { schema: Type.Unsafe<Readable>({ type: 'string' }) } } } }),
      },
    },
    async (req, reply) => {
      const body = await exportTrades(deps, req.user.id, req.params.id);
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
  await app.register(csvImportRoute, { deps });
}

/** Its own scope: here, and only here, a text/csv body of up to 5 MiB is read. */
async function csvImportRoute(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  app.addContentTypeParser('text/csv', { parseAs: 'buffer', bodyLimit: MAX_CSV_BYTES }, (_req, body: Buffer, done) => {
    if (!isUtf8(body))
      done(new AppError('VALIDATION_ERROR', 'the CSV is not UTF-8 text', { details: [{ path: '/', message: 'body must be UTF-8 text' }] }), undefined);
    else done(null, body.toString('utf8'));
  });
  app.post(
    '/accounts/:id/trades/import',
    {
      bodyLimit: MAX_CSV_BYTES,
      schema: {
        operationId: 'importTrades',
        tags: ['journal'],
        summary: 'Import trades from a CSV file',
        description:
          'Body text/csv, at most 5 MiB (else 413 PAYLOAD_TOO_LARGE) and 50,000 data rows (else 400 VALIDATION_ERROR). Valid rows are imported in one ' +
          'transaction; rows already stored are counted as duplicates (a row without externalId is keyed by its own fields, so importing ' +
          'a file twice adds nothing); invalid rows are reported by 1-based data row with the code a create would get (at most 100 listed). ' +
          'Not CSV, or no usable header → 400 VALIDATION_ERROR.',
        params: IdParams,
        consumes: ['text/csv'],
        body: CsvBody,
        response: responses({ 200: ImportReport }),
      },
    },
    async (req) => importTrades(deps, req.user.id, req.params.id, req.body),
  );
}
