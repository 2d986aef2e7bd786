import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One registry per app instance (no global), so tests can build many apps in one process. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpRequests: new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration (to the end of the response; streams included)',
      labelNames: ['method', 'route'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60],
      registers: [registry],
    }),
    streamsOpen: new Gauge({ name: 'advisor_streams_open', help: 'Advisor streams currently open', registers: [registry] }),
    streamsTotal: new Counter({
      name: 'advisor_streams_total',
      help: 'Advisor streams by provider and outcome',
      labelNames: ['provider', 'outcome'] as const,
      registers: [registry],
    }),
    keyProbes: new Counter({
      name: 'key_probes_total',
      help: 'Key verification probes by provider and result',
      labelNames: ['provider', 'result'] as const,
      registers: [registry],
    }),
    // DESIGN §16: the operator's view of turns, providers, the stores and the instance's limits.
    openStreams: new Gauge({
      name: 'advisor_open_streams',
      help: 'Stream connections (starts and attaches) this instance holds, against advisor_max_open_streams',
      registers: [registry],
    }),
    maxOpenStreams: new Gauge({
      name: 'advisor_max_open_streams',
      help: 'MAX_OPEN_STREAMS: stream connections beyond it are refused 503',
      registers: [registry],
    }),
    streamsRefused: new Counter({ name: 'advisor_streams_refused_total', help: 'Stream connections refused 503 at MAX_OPEN_STREAMS', registers: [registry] }),
    timeToFirstDelta: new Histogram({
      name: 'advisor_time_to_first_delta_seconds',
      help: 'From the stream request to the first delta sent, per provider and model',
      labelNames: ['provider', 'model'] as const,
      buckets: [0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 60],
      registers: [registry],
    }),
    providerErrors: new Counter({
      name: 'advisor_provider_errors_total',
      help: 'Turns ended by a provider error, per provider and error code',
      labelNames: ['provider', 'code'] as const,
      registers: [registry],
    }),
    settlementRetries: new Counter({
      name: 'advisor_settlement_retries_total',
      help: "A turn's end statement attempted again after a failure (no free connection, timeout)",
      registers: [registry],
    }),
    settlementFailures: new Counter({
      name: 'advisor_settlement_failures_total',
      help: "A turn's end that could not be stored (retries given up; the crash sweeper stores it)",
      registers: [registry],
    }),
    frameLogWrite: new Histogram({
      name: 'advisor_frame_log_write_seconds',
      help: "Writing a batch of frames to a turn's frame log (Redis, PostgreSQL or memory)",
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    dbPoolWait: new Histogram({
      name: 'db_pool_wait_seconds',
      help: 'Waiting for a PostgreSQL connection from the pool (a new connection opened included)',
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers: [registry],
    }),
    creditsGranted: new Counter({ name: 'billing_credits_granted_total', help: 'Credits granted by webhooks', registers: [registry] }),
    creditsSpent: new Counter({ name: 'billing_credits_spent_total', help: 'Credits spent on turns', registers: [registry] }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** key_probes_total's `result`: the outcome, or for a transient failure its reason (timeout, rate limit …). */
export function probeResultLabel(probe: { outcome: string; reason?: string }): string {
  return probe.outcome === 'transient' && probe.reason ? probe.reason : probe.outcome;
}
