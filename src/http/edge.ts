import { isUtf8 } from 'node:buffer';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import { randomToken } from '../platform/ids.ts';
import { AppError, envelope } from './errors.ts';

/**
 * What the HTTP server accepts before any route runs, and how it answers what it refuses: always
 * in the error envelope (DESIGN §3), never a bare status or a reset connection.
 */

/** All request headers together; Node's default is 16 KiB. Room for a large identity-provider token. */
const MAX_HEADER_BYTES = 32 * 1024;
/** One Authorization header: a JWT with a generous set of claims fits many times over. */
const MAX_AUTHORIZATION_BYTES = 8 * 1024;
/** Body cap of every JSON route but the stream routes (MAX_BODY_BYTES) and the webhook (1 MiB). */
export const SMALL_BODY_BYTES = 16 * 1024;
/** How long a refused connection is kept reading (and dropping) what the client still sends. */
const LINGER_MS = 1000;

/**
 * Options of Node's HTTP server. Fastify turns Node's request timeout off by default; here headers and
 * body must both arrive within REQUEST_TIMEOUT_MS (DESIGN §10), checked often enough that a slow
 * client is cut within a fraction of it rather than up to Node's 30 s checking interval later.
 */
export function serverLimits(requestTimeoutMs: number) {
  return {
    requestTimeout: requestTimeoutMs,
    http: {
      maxHeaderSize: MAX_HEADER_BYTES,
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(requestTimeoutMs / 4))),
    },
  };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{8,128}$/;
const requestIds = new WeakMap<IncomingMessage, string>();

/** The request's id: the client's X-Request-Id when well-formed, else a new one; remembered per request. */
export function requestIdOf(req: IncomingMessage): string {
  const known = requestIds.get(req);
  if (known !== undefined) return known;
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : `req_${randomToken()}`;
  requestIds.set(req, id);
  return id;
}

/** onRequest: headers the server parsed but no route should have to carry. */
export function refuseOversizedHeaders(req: FastifyRequest): void {
  const authorization = req.headers.authorization;
  if (authorization !== undefined && authorization.length > MAX_AUTHORIZATION_BYTES) {
    throw new AppError('HEADERS_TOO_LARGE', `the Authorization header must be at most ${MAX_AUTHORIZATION_BYTES} bytes`);
  }
}

/**
 * onRequest: a query string's escapes must spell UTF-8 (DESIGN §10). The query parser keeps an
 * escape it cannot decode (`%FF`) as its literal text, so `?q=%FF` and `?q=%25FF` would read alike;
 * a path parameter with such an escape is already refused by the router (frameworkError).
 */
export function refuseUndecodableQuery(req: FastifyRequest): void {
  const url = req.raw.url ?? '';
  const at = url.indexOf('?');
  if (at < 0 || !url.includes('%', at)) return;
  try {
    decodeURIComponent(url.slice(at + 1));
  } catch {
    throw new AppError('VALIDATION_ERROR', 'the URL is malformed: its query string is not percent-encoded UTF-8');
  }
}

/**
 * JSON bodies of every route (the webhook keeps its raw bytes) are parsed by Fastify's own parser,
 * prototype-poisoning checks included, once their bytes are known to be UTF-8: decoding alone would
 * turn an invalid byte into U+FFFD without a word, and the text stored would not be the text sent
 * (DESIGN §10). The check is one native pass over the bytes, no second parse of a large body.
 */
export const utf8JsonBodies = fp(async (app: FastifyInstance) => {
  // Fastify's default JSON parser is the callback form of FastifyBodyParser.
  const parseJson = app.getDefaultJsonParser(app.initialConfig.onProtoPoisoning ?? 'error', app.initialConfig.onConstructorPoisoning ?? 'error') as (
    req: FastifyRequest,
    body: string,
    done: (err: Error | null, body?: unknown) => void,
  ) => void;
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    if (!isUtf8(body)) {
      done(new AppError('VALIDATION_ERROR', 'the body is not valid UTF-8', { details: [{ path: '/', message: 'body must be UTF-8 text' }] }), undefined);
      return;
    }
    parseJson(req, body.toString('utf8'), done);
  });
});

/** Fastify's own refusals before routing (a path parameter too long, a malformed URL), as the envelope. */
export function frameworkError(err: FastifyError): AppError {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return new AppError('URI_TOO_LONG', 'a path segment of the URL is too long');
  return new AppError('VALIDATION_ERROR', 'the URL is malformed');
}

export function sendError(err: AppError, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
  return reply.code(err.status).header('x-request-id', req.id).type('application/json; charset=utf-8').send(envelope(err, req.id));
}

/**
 * The server's `clientError` listener: what Node's HTTP parser or its timers refuse (headers over
 * MAX_HEADER_BYTES, a request not received within REQUEST_TIMEOUT_MS, bytes that are not HTTP) is
 * answered in the envelope, then the connection is closed.
 */
export function createClientErrorHandler(log: Logger): (err: NodeJS.ErrnoException, socket: Socket) => void {
  const answered = new WeakSet<Socket>();
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed || answered.has(socket)) return;
    answered.add(socket);
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    const refusal = timedOut
      ? new AppError('REQUEST_TIMEOUT', 'the request was not received in time')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new AppError('HEADERS_TOO_LARGE', `request headers must be at most ${MAX_HEADER_BYTES} bytes together`)
        : new AppError('VALIDATION_ERROR', 'the request is not valid HTTP');
    // A request whose headers were read is in flight; its answer must not be written into.
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    const requestId = inFlight?.req ? requestIdOf(inFlight.req) : `req_${randomToken()}`;
    log.info({ reqId: requestId, code: refusal.code, reason: err.code }, 'request refused by the server');
    if (!socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify(envelope(refusal, requestId));
    const head = [
      `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}`,
      'content-type: application/json; charset=utf-8',
      `content-length: ${Buffer.byteLength(body)}`,
      `x-request-id: ${requestId}`,
      'connection: close',
    ];
    if (timedOut) {
      // The parser is still reading this request: closing at once is what keeps it from ever reaching
      // a route. A client this slow has little unread data in flight, so the answer gets through.
      socket.write(`${head.join('\r\n')}\r\n\r\n${body}`);
      socket.destroy();
      return;
    }
    // The parser has given up on this connection. Closing it while the client's bytes sit unread would
    // reset it, and the client could lose the answer: keep reading them for a moment, then close.
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  };
}
