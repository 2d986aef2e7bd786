// DESIGN §15: the project's nginx configuration (deploy/nginx.conf) in front of three real instances,
// run by Debian's nginx: streams pass frame by frame, a resume and a stop land on other instances than
// the turn's, what the outside must not reach is refused in the service's envelope, and X-Forwarded-For
// is believed only from the proxy TRUST_PROXY names. Registered with the other multi-instance suites;
// skipped, saying so, where nginx is not installed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { attachStream, openStream } from '../kits/conversations.ts';
import { gate, settles } from '../helpers/events.ts';
import { NGINX, startNginx, type Nginx } from '../helpers/nginx.ts';
import { CLUSTER_STORES_NAME, type Instance } from './cluster.ts';
import { CLUSTER_AVAILABLE, clusterWithFakes, framesAtEnd, message, newUser, saveKey, waitFor } from './kit.ts';

/** The address nginx reaches the instances from, and the only proxy they trust. */
const PROXY_ADDRESS = '127.0.0.1';
/** The test's client connects from another loopback address, so its address and nginx's differ. */
const CLIENT_ADDRESS = '127.0.0.2';
const FORGED = '203.0.113.7';

const requestId = (what: string): string => `nginx-${what}-${randomBytes(6).toString('hex')}`;
const chunks = (n: number): string[] => Array.from({ length: n }, (_, i) => `n${i} `);

interface LoggedRequest {
  readonly instance: number;
  readonly line: Record<string, unknown>;
}

/** The instance that logged `msg` for a request id (or a conversation), and that log line. */
function loggedBy(instances: readonly Instance[], msg: string, field: 'reqId' | 'conversationId', value: string): LoggedRequest | undefined {
  for (const [i, instance] of instances.entries()) {
    for (const text of instance.output().split('\n')) {
      if (!text.includes(value)) continue;
      const line = JSON.parse(text) as Record<string, unknown>;
      if (line['msg'] === msg && line[field] === value) return { instance: i, line };
    }
  }
  return undefined;
}

/** A plain HTTP request from CLIENT_ADDRESS: its status, headers and body. */
function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers, localAddress: CLIENT_ADDRESS }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const errorCode = (body: string): unknown => (JSON.parse(body) as { error?: { code?: unknown } }).error?.code;

if (!CLUSTER_AVAILABLE) {
  test('the service behind nginx (three server processes)', { skip: 'needs DATABASE_URL and REDIS_URL: npm run test:cluster' }, () => undefined);
} else if (!NGINX) {
  test('the service behind nginx (three server processes)', { skip: 'nginx is not installed (apt-get install nginx; .ci/run installs it)' }, () => undefined);
} else {
  describe(`DESIGN §15: behind nginx (deploy/nginx.conf), three instances, ${CLUSTER_STORES_NAME}`, () => {
    // LOG_LEVEL info: each request's log line names its instance, request id and client address.
    const setup = clusterWithFakes({ STRIPE_WEBHOOK_SECRET: 'whsec_nginx_test', LOG_LEVEL: 'info', TRUST_PROXY: PROXY_ADDRESS });
    const c = setup.cluster;
    let nginx: Nginx;
    before(async () => {
      nginx = await startNginx(c().instances.map((i) => i.url));
    });
    after(() => nginx.stop());

    test('DESIGN §15 behind nginx: a streamed turn arrives frame by frame — the first deltas reach the client while the provider still holds the rest', async () => {
      const user = newUser('nginx-frames');
      await saveKey(c(), user, setup.fake.validKey);
      const held = gate();
      setup.fake.enqueueStream({ chunks: chunks(5), hold: { afterChunks: 2, until: held.opened } });
      const post = openStream(nginx.url, await c().token(user), message());
      assert.equal(await post.status, 200);
      // Buffered by nginx, these would come only with the end of the reply, which waits for them.
      assert.deepEqual(await settles(post.deltas(2), 'the first two deltas through nginx while the provider holds the rest'), chunks(2));
      held.open();
      const frames = await framesAtEnd(post, 15_000);
      assert.deepEqual(
        frames.map((f) => f.event),
        ['start', 'delta', 'delta', 'delta', 'delta', 'delta', 'done'],
      );
    });

    test('DESIGN §15 behind nginx: a client cut mid-turn resumes through nginx on another instance, and a stop sent through nginx lands on a third: 202, the provider call aborted, the resumed stream ends done "stopped" with every frame once', async () => {
      const user = newUser('nginx-resume');
      await saveKey(c(), user, setup.fake.validKey);
      const token = await c().token(user);
      const held = gate();
      setup.fake.enqueueStream({ chunks: chunks(6), hold: { afterChunks: 3, until: held.opened } });
      const upstream = setup.fake.streams.length;
      const ids = { post: requestId('post'), attach: requestId('attach'), stop: requestId('stop') };
      try {
        // nginx takes the instances in turn (one round robin for all its workers): the three requests meet three instances.
        const post = openStream(nginx.url, token, message(), null, { 'x-request-id': ids.post });
        assert.equal(await post.status, 200);
        await settles(post.deltas(3), 'three deltas through nginx');
        post.destroy();
        const had = [...post.frames];
        const conversationId = String(had[0]?.data['conversationId']);
        const resumed = attachStream(nginx.url, token, conversationId, had.at(-1)?.id, 'header', { 'x-request-id': ids.attach });
        assert.equal(await resumed.status, 200);
        const stop = await fetch(`${nginx.url}/api/advisor/conversations/${conversationId}/stop`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'x-request-id': ids.stop },
        });
        assert.equal(stop.status, 202);
        await settles(setup.fake.streams[upstream]?.closed ?? Promise.reject(new Error('no upstream call')), 'the provider call aborted by the stop');
        const rest = await framesAtEnd(resumed, 15_000);
        assert.equal(rest.at(-1)?.event, 'done');
        assert.equal(rest.at(-1)?.data['finishReason'], 'stopped');
        const all = [...had, ...rest];
        assert.deepEqual(
          all.map((f) => f.id),
          Array.from({ length: all.length }, (_, i) => i + 1),
          'no frame twice, none missing',
        );

        const instances = c().instances;
        const turnOn = await waitFor(
          "the turn's end in an instance's log",
          async () => loggedBy(instances, 'advisor stream ended', 'conversationId', conversationId),
          10_000,
        );
        const stoppedOn = await waitFor("the stop in an instance's log", async () => loggedBy(instances, 'request', 'reqId', ids.stop), 10_000);
        assert.notEqual(stoppedOn.instance, turnOn.instance, 'the stop landed on another instance than the turn');
        const attachedOn = await waitFor("the resume in an instance's log", async () => loggedBy(instances, 'request', 'reqId', ids.attach), 10_000);
        assert.notEqual(attachedOn.instance, turnOn.instance, 'the resume landed on another instance than the turn');
        assert.notEqual(stoppedOn.instance, attachedOn.instance, 'the stop landed on a third instance');
      } finally {
        held.open();
      }
    });

    test('DESIGN §15 behind nginx: GET /metrics → 404 NOT_FOUND in the envelope (an instance answers it on loopback directly: 200)', async () => {
      const res = await request(`${nginx.url}/metrics`);
      assert.equal(res.status, 404);
      assert.equal(errorCode(res.body), 'NOT_FOUND');
      assert.match(String(res.headers['x-request-id']), /^req_[0-9a-f]{32}$/);
      assert.equal((await fetch(`${c().instances[0]?.url}/metrics`)).status, 200);
    });

    test('DESIGN §15 behind nginx: a stream body one byte past MAX_BODY_BYTES (20 MiB) → 413 PAYLOAD_TOO_LARGE in the envelope, refused by nginx before any instance reads it', async () => {
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(`${nginx.url}/api/advisor/conversations/new/messages/stream`, {
          method: 'POST',
          headers: { authorization: 'Bearer x', 'content-type': 'application/json', 'content-length': String(20 * 1024 * 1024 + 1) },
        });
        req.on('response', (r) => {
          let body = '';
          r.setEncoding('utf8');
          r.on('data', (ch: string) => (body += ch));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        // Only the head: nginx answers from the declared length.
        req.flushHeaders();
      });
      assert.equal(res.status, 413);
      assert.equal(errorCode(res.body), 'PAYLOAD_TOO_LARGE');
    });

    test("DESIGN §15: X-Forwarded-For is believed only from the proxy TRUST_PROXY names — through nginx an instance logs the client's address, not one it forged; a client connecting directly is logged as itself whatever it sends; an instance without TRUST_PROXY logs nginx's address", async () => {
      const forged = { 'x-forwarded-for': FORGED };
      const viaNginx = requestId('xff-nginx');
      assert.equal((await request(`${nginx.url}/healthz`, { headers: { ...forged, 'x-request-id': viaNginx } })).status, 200);
      const direct = requestId('xff-direct');
      assert.equal((await request(`${c().instances[0]?.url}/healthz`, { headers: { ...forged, 'x-request-id': direct } })).status, 200);

      const untrusting = await c().startInstance({ TRUST_PROXY: '' });
      const front = await startNginx([untrusting.url]);
      const untrusted = requestId('xff-untrusted');
      try {
        assert.equal((await request(`${front.url}/healthz`, { headers: { ...forged, 'x-request-id': untrusted } })).status, 200);
      } finally {
        await front.stop();
      }
      const ipOf = (id: string) => waitFor(`the log line of ${id}`, async () => loggedBy(c().instances, 'request', 'reqId', id)?.line['ip'], 10_000);
      assert.deepEqual([await ipOf(viaNginx), await ipOf(direct), await ipOf(untrusted)], [CLIENT_ADDRESS, CLIENT_ADDRESS, PROXY_ADDRESS]);
    });
  });
}
