// Prints a bearer token for local use: npm run token -- <userId> [--tier pro] [--ttl 1h]
// It reads the server's own configuration (DATA_DIR, AUTH_JWT_SECRET), so a token minted with the
// environment the server runs with is one it accepts.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../src/config.ts';
import { tokenSecret } from '../src/deps.ts';
import { mintToken } from '../src/http/auth.ts';

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
let config;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(2);
}
if (values.tier && !(values.tier in config.catalogue.tiers)) {
  process.stderr.write(`unknown tier "${values.tier}"; tiers: ${Object.keys(config.catalogue.tiers).join(', ')}\n`);
  process.exit(2);
}
const secret = tokenSecret(config, (m) => process.stderr.write(`${m}\n`));
if (secret === undefined) {
  process.stderr.write('AUTH_JWKS_URL is set: the service accepts only tokens of that identity provider, not tokens this script signs\n');
  process.exit(2);
}
process.stdout.write(`${await mintToken(secret, userId, { ttlSeconds: seconds, ...(values.tier ? { tier: values.tier } : {}) })}\n`);
