// Prints a bearer token for local use: npm run token -- <userId> [--tier pro] [--ttl 1h]
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { mintToken } from '../src/http/auth.ts';
import { loadOrCreateSecret } from '../src/platform/aes-vault.ts';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { tier: { type: 'string' }, ttl: { type: 'string', default: '1h' } },
});
const userId = positionals[0];
if (!userId) {
  process.stderr.write('usage: npm run token -- <userId> [--tier pro] [--ttl 1h|30m|3600s|7d]\n');
  process.exit(2);
}
const ttl = /^(\d+)([smhd]?)$/.exec(values.ttl ?? '1h');
if (!ttl) {
  process.stderr.write('--ttl must look like 3600, 30m, 1h or 7d\n');
  process.exit(2);
}
const seconds = Number(ttl[1]) * ({ s: 1, m: 60, h: 3600, d: 86400 }[ttl[2] || 's'] ?? 1);
const config = loadConfig(process.env);
if (values.tier && !(values.tier in config.catalogue.tiers)) {
  process.stderr.write(`unknown tier "${values.tier}"; tiers: ${Object.keys(config.catalogue.tiers).join(', ')}\n`);
  process.exit(2);
}
const secret = config.auth.jwtSecret ?? loadOrCreateSecret('jwt-secret', config.dataDir, (m) => process.stderr.write(`${m}\n`));
process.stdout.write(`${await mintToken(secret, userId, { ttlSeconds: seconds, ...(values.tier ? { tier: values.tier } : {}) })}\n`);
