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
    creditsGranted: new Counter({ name: 'billing_credits_granted_total', help: 'Credits granted by webhooks', registers: [registry] }),
    creditsSpent: new Counter({ name: 'billing_credits_spent_total', help: 'Credits spent on turns', registers: [registry] }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** key_probes_total's `result`: the outcome, or for a transient failure its reason (timeout, rate limit …). */
export function probeResultLabel(probe: { outcome: string; reason?: string }): string {
  return probe.outcome === 'transient' && probe.reason ? probe.reason : probe.outcome;
}
