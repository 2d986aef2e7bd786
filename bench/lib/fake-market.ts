// Process entry: the project's Polygon fake (test/fakes) on loopback, for the rows whose turns run
// advisor tools. It answers at once: the rows measure the service, not a market-data provider.
import { startPolygonFake } from '../../test/fakes/index.ts';

const fake = await startPolygonFake();
setInterval(() => {
  // The fake keeps a record of every request; a long run does not need them.
  fake.requests.length = 0;
}, 10_000).unref();
const stop = (): void => void fake.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.stdout.write(`fake polygon listening on ${fake.url} key ${fake.validKey}\n`);
