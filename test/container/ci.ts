// CI's container phase (DESIGN §16, `npm run test:container`): builds the image with Debian's podman and
// runs it as an operator would: /readyz 200, one advisor turn against a loopback fake of OpenAI with
// `podman stop` arriving while it streams — the turn ends whole, the server drains and the container
// exits 0. Prints each step's time.
//
// No image registry is reachable here, so the base is made offline (scripts: see baseImage): a
// `debootstrap --variant=minbase bookworm` root file system, cached by what it holds, plus the Node 24
// binary package-lock.json pins (verified by the host's `npm ci`) and the host's npm. On an ordinary
// machine the same Dockerfile builds from the public node image with no build argument.
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { mintToken } from '../../src/http/auth.ts';
import { startOpenAiCompatibleFake } from '../fakes/index.ts';
import { parseFrames } from '../kits/conversations.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CACHE = process.env.ADVISOR_CI_CACHE ?? '/var/cache/advisor-ci';
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
const DEBOOTSTRAP = { suite: 'bookworm', variant: 'minbase', include: ['ca-certificates'], mirror: 'http://deb.debian.org/debian' };
// crun refuses this host's mixed cgroups; no systemd runs here; the host allows nofile 20000.
const PODMAN = ['--runtime', 'runc', '--cgroup-manager', 'cgroupfs', '--events-backend', 'file'];
const ULIMITS = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=32768:32768'];
const IMAGE = 'localhost/advisor-service:ci';

const timings: [string, number][] = [];
async function step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
  const t0 = performance.now();
  process.stdout.write(`container: ${name}…\n`);
  const result = await fn();
  const ms = performance.now() - t0;
  timings.push([name, ms]);
  process.stdout.write(`container: ${name} done in ${(ms / 1000).toFixed(1)} s\n`);
  return result;
}

function sh(cmd: string, args: string[], opts: { input?: Buffer; quiet?: boolean } = {}): string {
  const r = spawnSync(cmd, args, {
    cwd: ROOT,
    input: opts.input,
    encoding: 'buffer',
    maxBuffer: 1 << 30,
    stdio: [opts.input ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  const out = r.stdout.toString();
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${out.slice(-4000)}\n${r.stderr.toString().slice(-4000)}`);
  if (!opts.quiet && r.stderr.length > 0) process.stderr.write(r.stderr.toString().slice(-2000));
  return out;
}
const podman = (args: string[], opts: { input?: Buffer; quiet?: boolean } = {}): string => sh('podman', [...PODMAN, ...args], opts);
const podmanAsync = (args: string[]): Promise<unknown> => promisify(execFile)('podman', [...PODMAN, ...args], { cwd: ROOT });
const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** podman, runc and debootstrap from Debian's packages, as a fresh CI machine has none of them. */
function ensureTools(): void {
  const missing = [
    ['podman', 'podman'],
    ['runc', 'runc'],
    ['debootstrap', 'debootstrap'],
  ].filter(([cmd]) => !has(cmd ?? ''));
  if (missing.length === 0) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-q'], { stdio: 'inherit', env });
  const packages = [...missing.map(([, pkg]) => pkg ?? ''), 'uidmap', 'netavark', 'aardvark-dns', 'fuse-overlayfs', 'slirp4netns'];
  execFileSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], { stdio: 'inherit', env });
}

const digest = (...parts: string[]): string => createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 16);

/** The debootstrap root file system as a tar, cached by the options that make it. */
function rootfsTar(): string {
  const file = path.join(CACHE, `debian-${DEBOOTSTRAP.suite}-${DEBOOTSTRAP.variant}-${digest(JSON.stringify(DEBOOTSTRAP))}.tar`);
  if (existsSync(file)) return file;
  mkdirSync(CACHE, { recursive: true });
  const dir = mkdtempSync(path.join(CACHE, 'rootfs-'));
  try {
    execFileSync(
      'debootstrap',
      [`--variant=${DEBOOTSTRAP.variant}`, `--include=${DEBOOTSTRAP.include.join(',')}`, DEBOOTSTRAP.suite, dir, DEBOOTSTRAP.mirror],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    sh('tar', ['-C', dir, '--numeric-owner', '-cf', `${file}.partial`, '.']);
    renameSync(`${file}.partial`, file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return file;
}

/** The locked Node 24 binary (npm ci checked its integrity) and the host's npm, in their node-image places. */
function nodeParts(): { node: string; npmDir: string; key: string } {
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { integrity?: string }> };
  const pkg = `node-linux-${process.arch}`;
  const integrity = lock.packages[`node_modules/${pkg}`]?.integrity;
  const node = path.join(ROOT, 'node_modules', pkg, 'bin/node');
  if (!integrity || !existsSync(node)) throw new Error(`${pkg} is not locked and installed: run npm ci first`);
  const npmCli = execFileSync('sh', ['-c', 'readlink -f "$(command -v npm)"']).toString().trim();
  const npmDir = path.resolve(path.dirname(npmCli), '..');
  const npmVersion = (JSON.parse(readFileSync(path.join(npmDir, 'package.json'), 'utf8')) as { version: string }).version;
  return { node, npmDir, key: `${integrity} npm@${npmVersion}` };
}

/** A local image standing in for node:24-bookworm-slim, tagged by what it holds. */
function baseImage(): string {
  const tar = rootfsTar();
  const parts = nodeParts();
  const tag = `localhost/advisor-base:${digest(path.basename(tar), parts.key)}`;
  if (spawnSync('podman', [...PODMAN, 'image', 'exists', tag]).status === 0) return tag;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'advisor-base-'));
  try {
    sh('tar', ['-C', dir, '-xf', tar]);
    const local = path.join(dir, 'usr/local');
    mkdirSync(path.join(local, 'lib/node_modules'), { recursive: true });
    cpSync(parts.node, path.join(local, 'bin/node'));
    cpSync(parts.npmDir, path.join(local, 'lib/node_modules/npm'), { recursive: true, verbatimSymlinks: true });
    symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', path.join(local, 'bin/npm'));
    symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', path.join(local, 'bin/npx'));
    const layer = execFileSync('tar', ['-C', dir, '--numeric-owner', '-c', '.'], { maxBuffer: 1 << 30 });
    podman(['import', '--change', 'CMD ["node"]', '-', tag], { input: layer, quiet: true });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return tag;
}

function buildImage(base: string): void {
  podman(
    [
      'build',
      '--format',
      'docker',
      '--network',
      'host',
      ...ULIMITS,
      // npm ci inside the build trusts what the host trusts.
      '-v',
      `${CA_BUNDLE}:${CA_BUNDLE}:ro`,
      '--build-arg',
      `NODE_EXTRA_CA_CERTS=${CA_BUNDLE}`,
      '--build-arg',
      `BASE=${base}`,
      '-t',
      IMAGE,
      '.',
    ],
    { quiet: true },
  );
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const address = srv.address();
  await new Promise((resolve) => srv.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function waitReady(url: string, name: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return status;
    const state = podman(['inspect', '--format', '{{.State.Status}}', name]).trim();
    if (state !== 'running') throw new Error(`the container is ${state}:\n${podman(['logs', name])}`);
    if (Date.now() > deadline) throw new Error(`/readyz still ${status} after ${timeoutMs} ms:\n${podman(['logs', name])}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const CHUNKS = Array.from({ length: 12 }, (_, i) => `part ${i + 1}. `);

/**
 * Saves the user's key (verified by the fake), starts one turn and, once its first delta has arrived,
 * calls `whileStreaming` (the stop): the turn must still end with `done` and every chunk.
 */
async function turnAcrossStop<T>(url: string, token: string, apiKey: string, whileStreaming: () => Promise<T>): Promise<{ reply: string; during: T }> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const saved = await fetch(`${url}/api/advisor/provider-keys/openai`, { method: 'PUT', headers, body: JSON.stringify({ apiKey }) });
  const key = (await saved.json()) as { verified?: boolean };
  if (saved.status !== 200 || key.verified !== true) throw new Error(`saving the key: ${saved.status} ${JSON.stringify(key)}`);
  const res = await fetch(`${url}/api/advisor/conversations/new/messages/stream`, {
    method: 'POST',
    headers: { ...headers, accept: 'text/event-stream' },
    body: JSON.stringify({ text: 'How did my last trade go?', clientMessageId: randomUUID() }),
  });
  if (res.status !== 200 || !res.body) throw new Error(`the turn's start: ${res.status} ${await res.text()}`);
  let body = '';
  let during: Promise<T> | undefined;
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    body += decoder.decode(chunk, { stream: true });
    if (!during && body.includes('event: delta')) during = whileStreaming();
  }
  if (!during) throw new Error(`no delta in: ${body.slice(0, 2000)}`);
  const { frames } = parseFrames(body);
  const reply = frames
    .filter((f) => f.event === 'delta')
    .map((f) => String(f.data['text'] ?? ''))
    .join('');
  if (frames.at(-1)?.event !== 'done' || reply !== CHUNKS.join('')) throw new Error(`the turn across the stop: ${JSON.stringify(frames).slice(0, 2000)}`);
  return { reply, during: await during };
}

async function main(): Promise<void> {
  const t0 = performance.now();
  await step('tools (podman, runc, debootstrap)', ensureTools);
  const base = await step('base image (debootstrap + locked Node 24; cached)', baseImage);
  await step('image build', () => buildImage(base));

  const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
  const name = `advisor-ci-${process.pid}`;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const jwtSecret = randomBytes(32).toString('base64url');
  try {
    await step('start to /readyz 200 (embedded database migrated)', async () => {
      podman(
        [
          'run',
          '-d',
          '--name',
          name,
          // Host network: the container reaches the loopback fake, and the fake's URL is the one it is given.
          '--network',
          'host',
          ...ULIMITS,
          // The HEALTHCHECK is run once by hand below: podman's timer for it needs systemd, which CI has not.
          '--health-interval',
          'disable',
          '-e',
          `PORT=${port}`,
          '-e',
          `OPENAI_BASE_URL=${fake.url}`,
          '-e',
          `AUTH_JWT_SECRET=${jwtSecret}`,
          IMAGE,
        ],
        { quiet: true },
      );
      await waitReady(url, name, 180_000);
    });
    await step('HEALTHCHECK', () => podman(['healthcheck', 'run', name]));
    // The turn streams for ~3 s; podman stop (SIGTERM) arrives after its first delta, so the drain has a
    // live stream to finish before the server exits.
    fake.scriptStream({ chunks: CHUNKS, delayMs: 250 });
    const token = await mintToken(jwtSecret, 'container-ci');
    const { reply, during } = await step('one advisor turn (fake OpenAI), podman stop (SIGTERM) during it', () =>
      turnAcrossStop(url, token, 'sk-valid-openai', async () => {
        const t0 = performance.now();
        // Without systemd, podman says it cannot remove the health-check timer it never made: not printed.
        await podmanAsync(['stop', '--time', '40', name]);
        return { stopMs: performance.now() - t0 };
      }),
    );
    process.stdout.write(`container: the reply was "${reply}"; podman stop returned after ${(during.stopMs / 1000).toFixed(1)} s\n`);
    const exitCode = Number(podman(['inspect', '--format', '{{.State.ExitCode}}', name]).trim());
    const printed = spawnSync('podman', [...PODMAN, 'logs', name], { encoding: 'utf8', maxBuffer: 1 << 30 });
    const logs = `${printed.stdout}${printed.stderr}`;
    const drained = /"liveStreams":1,"msg":"draining"/.test(logs) && /"msg":"stopped"/.test(logs);
    if (exitCode !== 0 || !drained) throw new Error(`exit code ${exitCode}, drained ${drained}:\n${logs.slice(-4000)}`);
    process.stdout.write('container: exit code 0; its log shows draining (1 live stream) and stopped\n');
  } finally {
    spawnSync('podman', [...PODMAN, 'rm', '--force', '--volumes', '--ignore', name], { stdio: 'ignore' });
    await fake.close();
  }
  process.stdout.write(`container: passed in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  for (const [name, ms] of timings) process.stdout.write(`  ${(ms / 1000).toFixed(1).padStart(7)} s  ${name}\n`);
}

await main();
