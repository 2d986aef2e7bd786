// DESIGN §10's operations routes under a proxy and a database that stops answering.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { READINESS_DEADLINE_MS, READINESS_PROBE_BUDGET_MS } from '../src/http/ops-routes.ts';
import { STORES, buildTestApp, type TestApp } from './helpers/app.ts';
import { TcpProxy } from './helpers/net.ts';

/** Headers by which a proxy says it relays someone else's request, with a value each might carry. */
const PROXY_HEADERS: [string, string][] = [
  ['Forwarded', 'for=203.0.113.7;proto=https'],
  ['X-Forwarded-For', '203.0.113.7'],
  ['X-Real-IP', '203.0.113.7'],
  ['X-Forwarded-Host', 'journal.example'],
  ['X-Forwarded-Proto', 'https'],
  ['X-Forwarded-Port', '443'],
  ['Via', '1.1 edge-proxy'],
  ['CF-Connecting-IP', '203.0.113.7'],
  ['True-Client-IP', '203.0.113.7'],
  ['X-Client-IP', '203.0.113.7'],
  ['X-Cluster-Client-IP', '203.0.113.7'],
  ['Fastly-Client-IP', '203.0.113.7'],
];

describe('/metrics behind a proxy (DESIGN §10)', () => {
  let t: TestApp;
  let url: string;
  before(async () => {
    t = await buildTestApp();
    url = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => t.close());

  test('DESIGN §10: a loopback client with no proxy header reads /metrics (200)', async () => {
    const res = await fetch(`${url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /http_requests_total/);
  });

  for (const [header, value] of PROXY_HEADERS) {
    test(`DESIGN §10: ${header} on /metrics from loopback, no METRICS_TOKEN → 404 NOT_FOUND`, async () => {
      const res = await fetch(`${url}/metrics`, { headers: { [header]: value } });
      const body = await res.text();
      assert.equal(res.status, 404);
      assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, 'NOT_FOUND');
      assert.doesNotMatch(body, /http_requests_total|credits/);
    });
  }
});

describe('/readyz while the database does not answer (DESIGN §10)', () => {
  test(`DESIGN §10: the readiness deadline is ${READINESS_DEADLINE_MS} ms`, () => {
    assert.equal(READINESS_DEADLINE_MS, 2000);
  });

  test(`DESIGN §10: the database probe's budget (${READINESS_PROBE_BUDGET_MS} ms) leaves room inside the deadline for the answer itself`, () => {
    assert.ok(READINESS_PROBE_BUDGET_MS <= READINESS_DEADLINE_MS - 400, String(READINESS_PROBE_BUDGET_MS));
  });

  test('DESIGN §10: /readyz while the database does not answer → 503 SERVICE_UNAVAILABLE that a probe with a 2 s timeout sees (it answered after 2,004–2,025 ms); ready again once it answers', async () => {
    const frozen = await frozenDatabase();
    try {
      const url = await frozen.t.app.listen({ port: 0, host: '127.0.0.1' });
      assert.equal((await fetch(`${url}/readyz`)).status, 200);
      frozen.freeze();
      // Three checks at once over HTTP, as probes of several load balancers with a 2 s timeout: a probe
      // that times out sees no answer at all, so each must have its 503 inside the 2 s.
      const started = performance.now();
      const answers = await Promise.all(
        [1, 2, 3].map(async () => {
          const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(READINESS_DEADLINE_MS) }).catch((err: unknown) => err);
          const ms = performance.now() - started;
          return { res, ms, body: res instanceof Response ? await res.text() : '' };
        }),
      );
      for (const { res, ms, body } of answers) {
        assert.ok(res instanceof Response, `the probe saw no answer within ${READINESS_DEADLINE_MS} ms: ${String(res)} after ${Math.round(ms)} ms`);
        assert.equal(res.status, 503, body);
        assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, 'SERVICE_UNAVAILABLE');
        assert.ok(Number(res.headers.get('retry-after')) >= 1);
        assert.ok(ms >= READINESS_PROBE_BUDGET_MS - 100 && ms < READINESS_DEADLINE_MS, `answered after ${Math.round(ms)} ms`);
      }
      frozen.thaw();
      let ready = 0;
      for (const deadline = Date.now() + 20_000; ready !== 200 && Date.now() < deadline;) {
        ready = (await frozen.t.call('GET', '/readyz')).statusCode;
        if (ready !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.equal(ready, 200);
    } finally {
      frozen.thaw();
      await frozen.close();
    }
  });
});

interface FrozenDatabase {
  readonly t: TestApp;
  /** The database stops answering: connections stay open, nothing comes back. */
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

/**
 * A test app whose database can stop answering. PostgreSQL: reached through a loopback TCP proxy that
 * stops forwarding (a frozen server, a black hole). Embedded PGlite (one connection, in process):
 * held by a transaction that waits, so no statement of anyone else's runs.
 */
async function frozenDatabase(): Promise<FrozenDatabase> {
  if (STORES.databaseUrl) {
    const target = new URL(STORES.databaseUrl);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    const via = new URL(STORES.databaseUrl);
    via.hostname = '127.0.0.1';
    via.port = String(await proxy.start(0));
    const t = await buildTestApp({ env: { DATABASE_URL: via.toString() } });
    return {
      t,
      freeze: () => proxy.freeze(),
      thaw: () => proxy.thaw(),
      async close() {
        await t.close();
        await proxy.stop();
      },
    };
  }
  const t = await buildTestApp();
  let release: (() => void) | undefined;
  let holding: Promise<void> = Promise.resolve();
  return {
    t,
    freeze() {
      const held = new Promise<void>((resolve) => (release = resolve));
      holding = t.deps.db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        await held;
      });
    },
    thaw: () => release?.(),
    async close() {
      await holding;
      await t.close();
    },
  };
}
