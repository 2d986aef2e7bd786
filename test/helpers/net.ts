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
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.#server = server;
    const address = server.address();
    if (!address || typeof address === 'string') throw new Error('no port');
    return address.port;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

