// Process entry: the project's OpenAI fake (test/fakes) on loopback, scripted over IPC by the bench.
//   parent → { id, script }   child → { id }  once every later stream request plays `script`
import { subscribe } from 'node:diagnostics_channel';
import { Server } from 'node:http';
import type { StreamScript } from '../../test/fakes/index.ts';
import { startOpenAiCompatibleFake } from '../../test/fakes/index.ts';

/**
 * The fake's server would close a connection after Node's default 5 s idle, without saying so (its
 * stream responses set their own Connection header, so Node sends no Keep-Alive hint), while the
 * service keeps an idle upstream connection 30 s and the bare proxy 60 s: a stream request sent on
 * one as the fake closes it fails with ECONNRESET. A provider's edge keeps idle connections far
 * longer than a bench's pauses; so does the fake here.
 */
const IDLE_KEEP_MS = 10 * 60_000;
subscribe('http.server.request.start', (message) => {
  const server = typeof message === 'object' && message !== null && 'server' in message ? message.server : undefined;
  if (server instanceof Server && server.keepAliveTimeout !== IDLE_KEEP_MS) server.keepAliveTimeout = IDLE_KEEP_MS;
});

export interface ScriptMessage {
  readonly id: number;
  /** Every later stream request plays this… */
  readonly script?: StreamScript;
  /** …after these, played once each, in order, by the next stream requests. */
  readonly queue?: readonly StreamScript[];
}

const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
process.on('message', (m: ScriptMessage) => {
  if (m.script) fake.scriptStream(m.script);
  for (const q of m.queue ?? []) fake.enqueueStream(q);
  forget();
  process.send?.({ id: m.id });
});
/**
 * The fake keeps a record of every request for the tests' assertions; the bench asserts nothing there.
 * Kept for a whole row, the records (a body's text and its parse: a few KB for a service request with its
 * system prompt and tools, a few hundred bytes for the bare proxy's) grow the fake's heap by tens of MB
 * and charge the side with the larger requests the fake's garbage collection of them.
 */
function forget(): void {
  fake.requests.length = 0;
  fake.streams.length = 0;
}
setInterval(forget, 250).unref();
const stop = (): void => void fake.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.once('disconnect', stop);
process.stdout.write(`fake openai listening on ${fake.url} key ${fake.validKey}\n`);
