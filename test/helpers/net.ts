import { createServer, connect, type Server, type Socket } from 'node:net';

/** A free loopback port (nothing listens on it once this returns). */
export async function unusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A loopback TCP proxy that can be cut and restored, to simulate a dependency (Redis, PostgreSQL) going away and coming back. */
export class TcpProxy {
  readonly #host: string;
  readonly #port: number;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #pairs = new Set<[Socket, Socket]>();
  #frozen = false;
  #listenPort = 0;

  constructor(host: string, port: number) {
    this.#host = host;
    this.#port = port;
  }

  async start(port: number): Promise<number> {
    const server = createServer((client) => {
      const upstream = connect(this.#port, this.#host);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => (s === client ? upstream : client).destroy());
      }
      const pair: [Socket, Socket] = [client, upstream];
      this.#pairs.add(pair);
      client.on('close', () => this.#pairs.delete(pair));
      if (!this.#frozen) flow(pair);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.#server = server;
    const address = server.address();
    if (!address || typeof address === 'string') throw new Error('no port');
    this.#listenPort = address.port;
    return address.port;
  }

  /** Listens again on the port of the last start (after `stop`: the dependency is back). */
  async reopen(): Promise<void> {
    await this.start(this.#listenPort);
  }

  /** Stops forwarding in both directions, connections left open: a dependency that hangs (SIGSTOP, a black hole). */
  freeze(): void {
    this.#frozen = true;
    for (const [client, upstream] of this.#pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  thaw(): void {
    this.#frozen = false;
    for (const pair of this.#pairs) flow(pair);
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

function flow([client, upstream]: [Socket, Socket]): void {
  client.pipe(upstream);
  upstream.pipe(client);
}

/** Resolves once something accepts connections on the loopback port (a server process just spawned). */
export async function waitForPort(port: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

export interface RawAnswer {
  /** Everything the server sent before it closed the connection. */
  readonly raw: string;
  readonly status: number | undefined;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** The socket error the client saw, if the connection was reset rather than closed. */
  readonly error: string | undefined;
  /** When the server closed the connection, in ms after the first byte was sent. */
  readonly closedAfterMs: number;
}

/**
 * Sends bytes over a plain TCP connection (what a fetch client would never send: oversized or
 * malformed heads, bodies trickled in slowly) and collects the answer until the server closes.
 * `parts` are written in order, `pauseMs` apart.
 */
export async function rawExchange(port: number, parts: (string | Buffer)[], pauseMs = 0): Promise<RawAnswer> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const started = Date.now();
  const chunks: Buffer[] = [];
  let error: string | undefined;
  const closed = new Promise<void>((resolve) => {
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    socket.on('close', () => resolve());
  });
  let open = true;
  void closed.then(() => (open = false));
  for (const [i, part] of parts.entries()) {
    if (!open) break;
    if (i > 0 && pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    if (open) socket.write(part);
  }
  await closed;
  const closedAfterMs = Date.now() - started;
  const raw = Buffer.concat(chunks).toString('utf8');
  const split = raw.indexOf('\r\n\r\n');
  const head = split < 0 ? raw : raw.slice(0, split);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const status = /^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1];
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
  return { raw, status: status ? Number(status) : undefined, headers, body: split < 0 ? '' : raw.slice(split + 4), error, closedAfterMs };
}
