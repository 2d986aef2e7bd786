import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Deps } from '../../deps.ts';
import { IdParams, NoContent, responses } from '../../http/schemas.ts';
import {
  Account,
  AccountList,
  Brokerage,
  BrokerageList,
  CreateAccountBody,
  CreateBrokerageBody,
  TradingDay,
  TimezoneList,
  TradingDayQuery,
  UpdateAccountBody,
} from './schemas.ts';
import * as service from './service.ts';
import { canonicalTimezones } from './timezones.ts';

export async function accountsRoutes(parent: FastifyInstance, { deps }: { deps: Deps }): Promise<void> {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['accounts'];

  app.post(
    '/accounts',
    { schema: { operationId: 'createAccount', tags, summary: 'Create an account', body: CreateAccountBody, response: responses({ 201: Account }) } },
    async (req, reply) => reply.code(201).send(await service.createAccount(deps, req.user.id, req.body)),
  );
  app.get(
    '/accounts',
    { schema: { operationId: 'listAccounts', tags, summary: "List the caller's accounts", response: responses({ 200: AccountList }) } },
    async (req) => ({
      items: await service.listAccounts(deps, req.user.id),
    }),
  );
  app.get(
    '/accounts/:id',
    { schema: { operationId: 'getAccount', tags, summary: 'Get an account', params: IdParams, response: responses({ 200: Account }) } },
    async (req) => service.getAccount(deps, req.user.id, req.params.id),
  );
  app.put(
    '/accounts/:id',
    {
      schema: {
        operationId: 'updateAccount',
        tags,
        summary: 'Update an account (spec 4.4)',
        description: 'Any subset of name, currency, brokerageId (null unlinks) and timezone. startingBalance is not updatable.',
        params: IdParams,
        body: UpdateAccountBody,
        response: responses({ 200: Account }),
      },
    },
    async (req) => service.updateAccount(deps, req.user.id, req.params.id, req.body),
  );
  app.delete(
    '/accounts/:id',
    { schema: { operationId: 'deleteAccount', tags, summary: 'Delete an account', params: IdParams, response: responses({ 204: NoContent }) } },
    async (req, reply) => {
      await service.deleteAccount(deps, req.user.id, req.params.id);
      return reply.code(204).send(null);
    },
  );
  app.get(
    '/accounts/:id/trading-day',
    {
      schema: {
        operationId: 'getTradingDay',
        tags,
        summary: 'Trading day of an instant, in the zone in force at that instant',
        params: IdParams,
        querystring: TradingDayQuery,
        response: responses({ 200: TradingDay }),
      },
    },
    async (req) => service.tradingDay(deps, req.user.id, req.params.id, req.query.at ? new Date(req.query.at) : undefined),
  );

  app.get(
    '/timezones',
    {
      schema: {
        operationId: 'listTimezones',
        tags,
        summary: 'Canonical IANA time zones an account may use',
        description:
          'What a timezone picker shows: the canonical zones, and the link names the service also accepts with the zone each is stored as (an account ' +
          'given Asia/Calcutta stores Asia/Kolkata).',
        response: responses({ 200: TimezoneList }),
      },
    },
    async (_req, reply) => reply.header('cache-control', 'private, max-age=86400').send(canonicalTimezones()),
  );

  const btags = ['brokerages'];
  app.post(
    '/brokerages',
    {
      schema: {
        operationId: 'createBrokerage',
        tags: btags,
        summary: 'Create a brokerage link',
        body: CreateBrokerageBody,
        response: responses({ 201: Brokerage }),
      },
    },
    async (req, reply) => reply.code(201).send(await service.createBrokerage(deps, req.user.id, req.body.name)),
  );
  app.get(
    '/brokerages',
    { schema: { operationId: 'listBrokerages', tags: btags, summary: 'List brokerage links', response: responses({ 200: BrokerageList }) } },
    async (req) => ({
      items: await service.listBrokerages(deps, req.user.id),
    }),
  );
  app.delete(
    '/brokerages/:id',
    {
      schema: {
        operationId: 'deleteBrokerage',
        tags: btags,
        summary: 'Delete a brokerage link (accounts are unlinked)',
        params: IdParams,
        response: responses({ 204: NoContent }),
      },
    },
    async (req, reply) => {
      await service.deleteBrokerage(deps, req.user.id, req.params.id);
      return reply.code(204).send(null);
    },
  );
}
