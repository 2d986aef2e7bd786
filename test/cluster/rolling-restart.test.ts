// DESIGN §16 "Rolling restarts without a client-visible error": three instances behind the shipped nginx
// (deploy/nginx.conf) under a steady load of streamed paid turns; each instance in turn gets SIGTERM,
// drains, exits and starts again on its port. No 5xx reaches a client (a draining instance's 503 and a
// start cut on a closing connection are sent on by nginx), every stream a client got ends with its
// terminal frame, and every wallet equals its ledger. The waits are for events (an exit, /readyz, the
// restarted instance serving a turn through nginx), never for a clock, so a busy machine only slows it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { NGINX, startNginx, type Nginx } from '../helpers/nginx.ts';
import { unusedPort } from '../helpers/net.ts';
import { CLUSTER_STORES_NAME, type Instance } from './cluster.ts';
import {
  CLUSTER_AVAILABLE,
  PAID_MODEL,
  PAID_TURN_CREDITS,
  clusterWithFakes,
  grantCredits,
  message,
  newUser,
  outcome,
  saveKey,
  streamPath,
  tally,
  waitFor,
  walletsOffLedger,
  type Outcome,
} from './kit.ts';

const USERS = 16;
/** DESIGN §4 admits 30 messages per rolling 60 s per user: a user sends one every 2.5 s at most. */
const PACE_MS = 2500;
const CREDITS_EACH = 2000 * PAID_TURN_CREDITS;
/** A reply of 60 deltas 50 ms apart (about 3 s): every drain meets turns in flight. */
const REPLY = { chunks: Array.from({ length: 60 }, (_, n) => `r${n} `), delayMs: 50 };
/**
 * Shorter than a reply, so the drain also ends turns with `error` SHUTTING_DOWN (a terminal frame), and
 * long enough that starts arrive at the draining instance (under nginx's earlier configuration each one
 * it refused reached its client as 503).
 */
const DRAIN_MS = '2500';

interface Load {
  /** Every answer a client got through nginx, in order. */
  readonly outcomes: Outcome[];
  /** Requests that got no HTTP answer from nginx at all. */
  readonly networkErrors: string[];
  stop(): Promise<void>;
}

const ended = (o: Outcome): string | undefined => {
  const last = o.frames.at(-1);
  return last?.event === 'done' || last?.event === 'error' ? last.event : undefined;
};

/**
 * Each user sends a message when its previous one ended (PACE_MS after it, if later), as a client following
 * docs/clients/retrying-starts.md does: a reply cut by the drain (`error` SHUTTING_DOWN) is sent
 * again as its replacement.
 */
function startLoad(baseUrl: string, users: readonly { id: string; token: string }[]): Load {
  const outcomes: Outcome[] = [];
  const networkErrors: string[] = [];
  let stopping = false;
  const post = async (token: string, path: string, body: unknown): Promise<Outcome | undefined> => {
    const next = sleep(PACE_MS);
    try {
      const res = await fetch(`${baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const o = await outcome(res);
      outcomes.push(o);
      return o;
    } catch (err) {
      networkErrors.push(String(err));
      return undefined;
    } finally {
      await next;
    }
  };
  const loop = async (user: { id: string; token: string }): Promise<void> => {
    while (!stopping) {
      const first = message();
      const o = await post(user.token, streamPath(), first);
      const start = o?.frames[0]?.data;
      const last = o?.frames.at(-1);
      if (last?.event === 'error' && last.data['code'] === 'SHUTTING_DOWN' && start !== undefined) {
        await post(user.token, streamPath(String(start['conversationId'])), {
          ...message(first.text),
          replaces: String(start['userMessageId']),
        });
      }
    }
  };
  const running = Promise.all(users.map(loop));
  return {
    outcomes,
    networkErrors,
    async stop() {
      stopping = true;
      await running;
    },
  };
}

const doneTurns = (load: Load): number => load.outcomes.filter((o) => o.frames.at(-1)?.event === 'done').length;
const turnsEndedOn = (instance: Instance): number => instance.output().split('"msg":"advisor stream ended"').length - 1;
/** Stream starts an instance refused 503 (its request log lines): nginx sent each on to another. */
const refusedStarts = (instance: Instance): number =>
  instance
    .output()
    .split('\n')
    .filter((l) => l.includes(`"status":503`) && l.includes('messages/stream')).length;

if (!CLUSTER_AVAILABLE) {
  test('rolling restart behind nginx (three server processes)', { skip: 'needs DATABASE_URL and REDIS_URL: npm run test:cluster' }, () => undefined);
} else if (!NGINX) {
  test(
    'rolling restart behind nginx (three server processes)',
    { skip: 'nginx is not installed (apt-get install nginx; .ci/run installs it)' },
    () => undefined,
  );
} else {
  describe(`DESIGN §16: a rolling restart behind nginx (deploy/nginx.conf), three instances, ${CLUSTER_STORES_NAME}`, () => {
    // Started below on ports of their own: a restarted instance comes back where nginx expects it.
    // LOG_LEVEL info: each instance logs its requests and the end of each turn it ran.
    const setup = clusterWithFakes(
      { STRIPE_WEBHOOK_SECRET: 'whsec_rolling_test', LOG_LEVEL: 'info', TRUST_PROXY: '127.0.0.1', SHUTDOWN_DRAIN_MS: DRAIN_MS },
      0,
    );
    const c = setup.cluster;
    const ports: number[] = [];
    let nginx: Nginx;
    before(async () => {
      for (let i = 0; i < 3; i++) {
        const port = await unusedPort();
        ports.push(port);
        await c().startInstance({ PORT: String(port) });
      }
      nginx = await startNginx(c().instances.map((i) => i.url));
    });
    after(() => nginx.stop());

    test(
      'DESIGN §16: three instances restarted one by one (SIGTERM, drain, exit 0, started again on the same port) under steady streamed paid turns through nginx → no 5xx and no failed request reaches a client, every stream ends with done or error, no reply left streaming nor charge reserved, ledger = wallet',
      { timeout: 600_000 },
      async () => {
        setup.fake.scriptStream(REPLY);
        const users = await Promise.all(
          Array.from({ length: USERS }, async (_, n) => {
            const id = newUser(`rolling-${n}`);
            await saveKey(c(), id, setup.fake.validKey, PAID_MODEL);
            await grantCredits(c(), id, CREDITS_EACH);
            return { id, token: await c().token(id) };
          }),
        );
        const serving = [...c().instances];
        const load = startLoad(nginx.url, users);
        const restarts: { exit: number | null; refused: number; endedDuringDrain: number }[] = [];
        try {
          // Every instance serving turns through nginx before the first goes down.
          await waitFor('each instance serving turns through nginx', async () => (serving.every((x) => turnsEndedOn(x) >= 2) ? true : undefined), 120_000);
          for (const [n, instance] of serving.entries()) {
            const before = turnsEndedOn(instance);
            const exit = await instance.kill('SIGTERM');
            const fresh = await c().startInstance({ PORT: String(ports[n]) });
            serving[n] = fresh;
            restarts.push({ exit, refused: refusedStarts(instance), endedDuringDrain: turnsEndedOn(instance) - before });
            await waitFor(`instance ${n} ready again`, async () => ((await fetch(`${fresh.url}/readyz`)).status === 200 ? true : undefined), 60_000);
            // Back in nginx's rotation (within fail_timeout) before the next one goes.
            await waitFor(`instance ${n} serving turns through nginx again`, async () => (turnsEndedOn(fresh) >= 2 ? true : undefined), 120_000);
          }
          // The load goes on a little on the restarted three.
          const doneBefore = doneTurns(load);
          await waitFor('more turns after the last restart', async () => (doneTurns(load) >= doneBefore + 3 * USERS ? true : undefined), 120_000);
        } finally {
          await load.stop();
        }

        const statuses = tally(load.outcomes);
        const fiveXx = load.outcomes.filter((o) => o.status >= 500).length;
        const streams = load.outcomes.filter((o) => o.status === 200);
        const withoutEnd = streams.filter((o) => ended(o) === undefined).length;
        const endings = tally(
          streams.map((o) => ({ ...o, code: `${ended(o) ?? 'none'} ${String(o.frames.at(-1)?.data['code'] ?? o.frames.at(-1)?.data['finishReason'] ?? '')}` })),
        );
        process.stdout.write(
          `# rolling restart: ${restarts.length} rounds, ${load.outcomes.length} requests (${JSON.stringify(statuses)}), stream endings ${JSON.stringify(endings)}; ` +
            `per round: exit code, starts the draining instance refused 503 (sent on by nginx), turns it ended while draining ${JSON.stringify(restarts)}; ` +
            `5xx ${fiveXx}, network errors ${load.networkErrors.length}, streams without a terminal frame ${withoutEnd}\n`,
        );

        assert.deepEqual(
          restarts.map((r) => r.exit),
          [0, 0, 0],
          'every instance drained and exited 0',
        );
        assert.equal(fiveXx, 0, `no 5xx reaches a client: ${JSON.stringify(statuses)}`);
        assert.deepEqual(load.networkErrors, [], 'every request got an answer');
        assert.deepEqual(Object.keys(statuses), ['200'], 'every start was answered with its stream');
        assert.equal(withoutEnd, 0, 'every stream ends with done or error');
        assert.ok(
          restarts.every((r) => r.endedDuringDrain > 0),
          'every drain met turns in flight',
        );
        assert.ok(doneTurns(load) >= 6 * USERS, `turns done: ${doneTurns(load)}`);

        const ids = users.map((u) => u.id);
        const [streaming] = await c().sql<{ n: number }>(
          "select count(*)::int as n from messages where role = 'assistant' and status = 'streaming' and user_id = any($1)",
          [ids],
        );
        const [reserved] = await c().sql<{ n: number }>("select count(*)::int as n from turn_charges where status = 'reserved' and user_id = any($1)", [ids]);
        assert.deepEqual([streaming?.n, reserved?.n], [0, 0], 'no reply left streaming, no charge left reserved');
        assert.deepEqual(await walletsOffLedger(c()), [], 'ledger = wallet');
      },
    );
  });
}
