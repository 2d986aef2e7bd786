import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../src/config.ts';

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
      (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.startsWith('RESERVATION_SWEEP_AFTER_MS (4000) must be at least 3 × STREAM_HEARTBEAT_MS (1500)')),
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
});
