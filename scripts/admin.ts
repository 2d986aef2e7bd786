// Operator commands against the configured database. On the embedded database, stop the server
// first: PGlite serves one process at a time, and this refuses to start while another holds DATA_DIR.
//   npm run admin -- set-tier <userId> <tier>
//   npm run admin -- grant <userId> <credits> --reason "<why>" [--ref <idempotency key>]
//   npm run admin -- take <userId> <credits> --reason "<why>" [--ref <idempotency key>]
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../src/config.ts';
import { createDeps } from '../src/deps.ts';
import { setTier, userTier } from '../src/features/users/service.ts';
import { grantCredits } from '../src/features/billing/wallet-service.ts';
import { DataDirLockedError } from '../src/platform/data-dir-lock.ts';

const USAGE = [
  'usage:',
  '  npm run admin -- set-tier <userId> <tier>',
  '  npm run admin -- grant <userId> <credits> --reason "<why>" [--ref <key>]',
  '  npm run admin -- take <userId> <credits> --reason "<why>" [--ref <key>]    (a correction; the balance may go negative)',
  '    credits: a positive integer; --ref makes a re-run write nothing',
].join('\n');

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

function args() {
  try {
    return parseArgs({ allowPositionals: true, options: { reason: { type: 'string' }, ref: { type: 'string' } } });
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
}
const { positionals, values } = args();
const [command, userId, arg] = positionals;
if (!command || !userId || !arg || positionals.length > 3) fail('missing or extra arguments');
if (userId.length > 128) fail('userId must be at most 128 characters');

let config;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) fail(err.message);
  throw err;
}

if (command === 'set-tier') {
  if (!(arg in config.catalogue.tiers)) fail(`unknown tier "${arg}"; tiers: ${Object.keys(config.catalogue.tiers).join(', ')}`);
} else if (command === 'grant' || command === 'take') {
  if (!/^[0-9]{1,12}$/.test(arg) || Number(arg) === 0) fail('credits must be a positive integer');
  if (!values.reason?.trim()) fail(`--reason is required for ${command}`);
  if (values.ref !== undefined && !/^[A-Za-z0-9._:-]{1,100}$/.test(values.ref)) fail('--ref must be 1-100 characters of [A-Za-z0-9._:-]');
} else {
  fail(`unknown command "${command}"`);
}

let deps;
try {
  deps = await createDeps(config);
} catch (err) {
  if (!(err instanceof ConfigError || err instanceof DataDirLockedError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}
try {
  if (command === 'set-tier') {
    const before = await userTier(deps, userId);
    await setTier(deps, userId, arg);
    process.stdout.write(`${userId}: tier ${before} → ${arg}\n`);
  } else {
    const credits = command === 'take' ? -Number(arg) : Number(arg);
    const result = await grantCredits(deps, userId, credits, values.reason?.trim() ?? '', values.ref);
    process.stdout.write(
      result.written
        ? `${userId}: ${command === 'take' ? 'took back' : 'granted'} ${arg} credits (${result.reference}); balance ${result.balance}\n`
        : `${userId}: ${result.reference} was already applied; nothing written; balance ${result.balance}\n`,
    );
  }
} finally {
  await deps.close();
}
