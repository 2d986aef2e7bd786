import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import fastifyStatic from '@fastify/static';

/** Where `npm run build:web` (run by `npm ci`) writes the client. */
export const WEB_DIST = path.resolve(import.meta.dirname, '../../web/dist');

/** The client's own paths (history routing); each answers the same page. */
export const CLIENT_PATHS = [
  '/',
  '/sign-in',
  '/chat',
  '/chat/:id',
  '/keys',
  '/accounts',
  '/accounts/:id/journal',
  '/billing',
  '/billing/success',
  '/billing/cancel',
  '/usage',
];

/**
 * Model output is rendered as Markdown in this page; what a sanitiser misses still cannot run: only the
 * page's own scripts and styles load, nothing is fetched from elsewhere, no plugin, no <base>, no framing
 * by another site. Images are the service's own, `blob:` (attachments fetched with the token, previews)
 * and `data:`.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'self'",
  "object-src 'none'",
].join('; ');

/**
 * The web client, served by the same process: the page at each client path (never cached, so
 * a new build is picked up at once) and its hashed assets under /assets/ (cached for a year, immutable;
 * gzip and brotli files written by the build are sent to clients that take them).
 */
export async function webClientRoutes(app: FastifyInstance, opts: { dist?: string } = {}): Promise<void> {
  const dist = opts.dist ?? WEB_DIST;
  const indexFile = path.join(dist, 'index.html');
  const page = existsSync(indexFile) ? readFileSync(indexFile) : undefined;
  const sendPage = (reply: FastifyReply) => {
    reply
      .header('content-security-policy', CONTENT_SECURITY_POLICY)
      .header('cache-control', 'no-cache')
      .header('referrer-policy', 'no-referrer')
      .header('x-content-type-options', 'nosniff')
      .header('cross-origin-opener-policy', 'same-origin');
    if (!page) {
      return reply
        .code(503)
        .type('text/html; charset=utf-8')
        .send('<!doctype html><title>Advisor</title><p>The web client is not built. Run <code>npm run build:web</code> (npm ci does it) and restart.</p>');
    }
    return reply.type('text/html; charset=utf-8').send(page);
  };
  for (const url of CLIENT_PATHS) app.get(url, { schema: { hide: true } }, async (_req, reply) => sendPage(reply));
  if (!page) return;
  await app.register(fastifyStatic, {
    root: path.join(dist, 'assets'),
    prefix: '/assets/',
    immutable: true,
    maxAge: '365d',
    preCompressed: true,
    index: false,
    wildcard: true,
  });
  if (existsSync(path.join(dist, 'favicon.svg'))) {
    const icon = readFileSync(path.join(dist, 'favicon.svg'));
    app.get('/favicon.svg', { schema: { hide: true } }, async (_req, reply) =>
      reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon),
    );
  }
}
