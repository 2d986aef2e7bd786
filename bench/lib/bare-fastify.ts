// Process entry: the JSON baseline. Fastify with one route answering the same body as the service's
// GET /api/billing/packs, with a response schema; no logger, auth, hooks or metrics.
import Fastify from 'fastify';
import { BUILT_IN_CATALOGUE } from '../../src/catalogue.ts';

const items = BUILT_IN_CATALOGUE.creditPacks.map(({ packId, name, credits, amount, currency }) => ({ packId, name, credits, amount, currency }));
const app = Fastify({ logger: false });
app.get(
  '/packs',
  {
    schema: {
      response: {
        200: {
          type: 'object',
          properties: {
            items: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  packId: { type: 'string' },
                  name: { type: 'string' },
                  credits: { type: 'integer' },
                  amount: { type: 'integer' },
                  currency: { type: 'string' },
                },
              },
            },
          },
        },
      },
    },
  },
  async () => ({ items }),
);
const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`bare fastify listening on ${address}\n`);
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
