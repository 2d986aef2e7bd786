import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../src/config.ts';
import { configProblems } from './helpers/app.ts';

describe('configuration', () => {
  test('DESIGN §1: the reservation sweeper defaults to settling reservations open 10 min, looking every 30 s', () => {
    const config = loadConfig({});
    assert.deepEqual([config.reservationSweepAfterMs, config.reservationSweepIntervalMs], [600_000, 30_000]);
    const tuned = loadConfig({ RESERVATION_SWEEP_AFTER_MS: '4000', RESERVATION_SWEEP_INTERVAL_MS: '500', STREAM_HEARTBEAT_MS: '1000' });
    assert.deepEqual([tuned.reservationSweepAfterMs, tuned.reservationSweepIntervalMs], [4000, 500]);
  });

  test('DESIGN §10: a sweep age shorter than three heartbeats (a live turn could be taken for crashed) stops the start', () => {
    assert.throws(
      () => loadConfig({ RESERVATION_SWEEP_AFTER_MS: '4000', STREAM_HEARTBEAT_MS: '1500' }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.some((p) => p.startsWith('RESERVATION_SWEEP_AFTER_MS (4000) must be at least 3 × STREAM_HEARTBEAT_MS (1500)')),
    );
  });

  test('DESIGN §1: a bad sweeper setting stops the start with a message naming each variable', () => {
    assert.throws(
      () => loadConfig({ RESERVATION_SWEEP_AFTER_MS: '10s', RESERVATION_SWEEP_INTERVAL_MS: '0' }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.some((p) => p.startsWith('RESERVATION_SWEEP_AFTER_MS must be an integer')) &&
        err.problems.some((p) => p.startsWith('RESERVATION_SWEEP_INTERVAL_MS must be an integer')),
    );
  });

  test('DESIGN §1: the PostgreSQL pool holds 20 connections and closes one only after 5 min unused', () => {
    const config = loadConfig({});
    assert.deepEqual([config.databasePoolSize, config.databasePoolIdleMs], [20, 300_000]);
    const tuned = loadConfig({ DATABASE_POOL_SIZE: '8', DATABASE_POOL_IDLE_MS: '0' });
    assert.deepEqual([tuned.databasePoolSize, tuned.databasePoolIdleMs], [8, 0]);
  });

  test('DESIGN §1: a bad pool setting stops the start with a message naming each variable', () => {
    assert.throws(
      () => loadConfig({ DATABASE_POOL_SIZE: '0', DATABASE_POOL_IDLE_MS: '-1' }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.some((p) => p.startsWith('DATABASE_POOL_SIZE must be an integer between 1 and')) &&
        err.problems.some((p) => p.startsWith('DATABASE_POOL_IDLE_MS must be an integer between 0 and')),
    );
  });

  test('DESIGN §10: PostgreSQL connect timeout 5 s and statement timeout 10 s by default; bad values stop the start naming them', () => {
    const config = loadConfig({});
    assert.deepEqual([config.databaseConnectTimeoutMs, config.databaseStatementTimeoutMs], [5000, 10_000]);
    const tuned = loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '2000', DATABASE_STATEMENT_TIMEOUT_MS: '30000' });
    assert.deepEqual([tuned.databaseConnectTimeoutMs, tuned.databaseStatementTimeoutMs], [2000, 30_000]);
    assert.throws(
      () => loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '5s', DATABASE_STATEMENT_TIMEOUT_MS: '0' }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.some((p) => p.startsWith('DATABASE_CONNECT_TIMEOUT_MS must be an integer')) &&
        err.problems.some((p) => p.startsWith('DATABASE_STATEMENT_TIMEOUT_MS must be an integer')),
    );
  });
  test('DESIGN §15: REDIS_CLUSTER_NODES selects a Redis Cluster from its host:port seeds; REDIS_URL then lends only its credentials', () => {
    assert.equal(loadConfig({}).redis, undefined);
    assert.deepEqual(loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379' }).redis, { url: 'redis://127.0.0.1:6379', clusterNodes: undefined });
    assert.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b.internal:7001,[::1]:7002' }).redis, {
      url: undefined,
      clusterNodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'redis-b.internal', port: 7001 },
        { host: '::1', port: 7002 },
      ],
    });
    assert.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000', REDIS_URL: 'rediss://:secret@ignored:1' }).redis, {
      url: 'rediss://:secret@ignored:1',
      clusterNodes: [{ host: '10.0.0.1', port: 7000 }],
    });
  });

  test('DESIGN §15: a REDIS_CLUSTER_NODES entry without a port, or with a port out of range, stops the start naming it', () => {
    for (const bad of ['10.0.0.1', '10.0.0.1:0', 'a:70000', 'redis://a:7000', 'a:7000,,b:7001']) {
      assert.ok(
        configProblems({ REDIS_CLUSTER_NODES: bad }).some((p) => p.startsWith('REDIS_CLUSTER_NODES must be comma-separated host:port entries')),
        bad,
      );
    }
  });

  test('DESIGN §15: DATABASE_PREPARED_STATEMENTS defaults to true, false turns named statements off; anything else stops the start', () => {
    assert.equal(loadConfig({}).databasePreparedStatements, true);
    assert.equal(loadConfig({ DATABASE_PREPARED_STATEMENTS: 'false' }).databasePreparedStatements, false);
    assert.ok(configProblems({ DATABASE_PREPARED_STATEMENTS: 'maybe' }).some((p) => p.startsWith('DATABASE_PREPARED_STATEMENTS must be true or false')));
  });

  test('DESIGN §16: DATABASE_STATEMENT_FUNCTIONS (plans kept behind a pooler) defaults to true, false turns them off; anything else stops the start', () => {
    assert.equal(loadConfig({}).databaseStatementFunctions, true);
    assert.equal(loadConfig({ DATABASE_STATEMENT_FUNCTIONS: 'false' }).databaseStatementFunctions, false);
    assert.ok(configProblems({ DATABASE_STATEMENT_FUNCTIONS: 'maybe' }).some((p) => p.startsWith('DATABASE_STATEMENT_FUNCTIONS must be true or false')));
  });

  test('DESIGN §15: DATABASE_LISTEN_URL (the LISTEN connection, past a pooler) defaults to DATABASE_URL', () => {
    const secrets = { ENCRYPTION_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`, AUTH_JWT_SECRET: 'x'.repeat(32) };
    const pooled = 'postgres://app@pooler:6432/advisor';
    assert.equal(loadConfig({ ...secrets, DATABASE_URL: pooled }).databaseListenUrl, pooled);
    assert.equal(
      loadConfig({ ...secrets, DATABASE_URL: pooled, DATABASE_LISTEN_URL: 'postgres://app@db:5432/advisor' }).databaseListenUrl,
      'postgres://app@db:5432/advisor',
    );
  });

  test("DESIGN §15: TRUST_PROXY is off by default and takes the proxies' addresses and CIDR ranges; `true` and hop counts (a direct client could name any address) stop the start", () => {
    assert.equal(loadConfig({}).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
    assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.5, 10.1.0.0/16,::1,fd00::/8,loopback' }).trustProxy, [
      '10.0.0.5',
      '10.1.0.0/16',
      '::1',
      'fd00::/8',
      'loopback',
    ]);
    for (const bad of ['true', '1', '2', '10.0.0.0/33', 'proxy.internal', '10.0.0.1/8/1']) {
      assert.ok(
        configProblems({ TRUST_PROXY: bad }).some((p) => p.startsWith('TRUST_PROXY must be')),
        bad,
      );
    }
  });
});
