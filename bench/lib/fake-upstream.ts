// Process entry: the project's OpenAI fake (test/fakes) on loopback, scripted over IPC by the bench.
//   parent → { id, script }   child → { id }  once every later stream request plays `script`
import type { StreamScript } from '../../test/fakes/index.ts';
import { startOpenAiCompatibleFake } from '../../test/fakes/index.ts';

export interface ScriptMessage {
  readonly id: number;
  readonly script: StreamScript;
}

const fake = await startOpenAiCompatibleFake({ flavor: 'openai' });
process.on('message', (m: ScriptMessage) => {
  fake.scriptStream(m.script);
  // The fake keeps a record of every request; a long run does not need them.
  fake.requests.length = 0;
  fake.streams.length = 0;
  process.send?.({ id: m.id });
});
const stop = (): void => void fake.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.once('disconnect', stop);
process.stdout.write(`fake openai listening on ${fake.url} key ${fake.validKey}\n`);
