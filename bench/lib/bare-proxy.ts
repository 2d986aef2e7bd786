// Process entry: the relay baseline. A bare node:http server that forwards each POST body to the
// upstream's /chat/completions with undici and pipes the SSE bytes back unchanged: no auth, no
// database, no parsing. What the service does beyond this is its overhead.
//   UPSTREAM_URL=http://127.0.0.1:port/v1 UPSTREAM_KEY=sk-… node bench/lib/bare-proxy.ts
import { createServer } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';

const upstream = process.env.UPSTREAM_URL ?? '';
const authorization = `Bearer ${process.env.UPSTREAM_KEY ?? ''}`;
if (!upstream) throw new Error('UPSTREAM_URL is required');
// Same pooling as Node's global fetch dispatcher: keep-alive, no connection cap.
const dispatcher = new Agent({ keepAliveTimeout: 60_000 });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const ac = new AbortController();
    res.once('close', () => ac.abort());
    request(`${upstream}/chat/completions`, {
      method: 'POST',
      dispatcher,
      signal: ac.signal,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization },
      body: Buffer.concat(chunks),
    })
      .then(async (up) => {
        res.writeHead(up.statusCode, {
          'content-type': String(up.headers['content-type'] ?? 'application/octet-stream'),
          'cache-control': 'no-cache, no-transform',
        });
        await pipeline(up.body, res);
      })
      .catch(() => {
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  process.stdout.write(`bare proxy listening on http://127.0.0.1:${address.port}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
