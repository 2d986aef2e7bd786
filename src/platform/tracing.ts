// DESIGN §16: OpenTelemetry traces, off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (then OTLP over HTTP).
// A span per HTTP request; a turn's stages are its children: admission, the start statement, each
// provider call to its first byte, the first delta, each tool call, the settlement. The code that
// runs a stage names it in one line (`traced`, `firstDelta`); the spans hang off "owners" — the
// request's IncomingMessage, and objects bound to it (the request's lease claim, its live turn) —
// so no stage needs the request itself. Time to first delta and provider errors are metrics whether
// or not tracing is on.
import type { IncomingMessage } from 'node:http';
import type * as OpenTelemetryApi from '@opentelemetry/api';
import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import type { Metrics } from './metrics.ts';
import { packageVersion } from '../version.ts';

type Api = typeof OpenTelemetryApi;

/**
 * One app's tracer; `tracer` undefined when tracing is off (then no span is ever made, and no
 * OpenTelemetry module is even loaded: the SDK and the OTLP exporter take ~0.8 s to load).
 */
export interface Tracing {
  readonly tracer: Tracer | undefined;
  /** The API's functions, loaded with the tracer. */
  readonly api: Api | undefined;
  readonly metrics: Metrics;
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}

/**
 * `endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT): spans batched to `<endpoint>/v1/traces`; `exporter` (tests):
 * each span handed over as it ends. Neither: off.
 */
export async function createTracing(metrics: Metrics, endpoint: string | undefined, exporter?: SpanExporter): Promise<Tracing> {
  if (endpoint === undefined && exporter === undefined) return { tracer: undefined, api: undefined, metrics, shutdown: async () => undefined };
  const [api, { BatchSpanProcessor, SimpleSpanProcessor, TracerProvider }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/resources'),
  ]);
  const processor =
    exporter !== undefined
      ? new SimpleSpanProcessor({ exporter })
      : new BatchSpanProcessor({
          exporter: new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter({ url: `${endpoint?.replace(/\/+$/, '')}/v1/traces` }),
        });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'advisor-service', 'service.version': packageVersion() }),
    spanProcessors: [processor],
  });
  return { tracer: provider.getTracer('advisor-service', packageVersion()), api, metrics, shutdown: () => provider.shutdown() };
}

/** What an owner's spans hang off, and when its request arrived (time to first delta counts from it). */
interface Scope {
  readonly tracing: Tracing;
  /** The request's span's context; undefined when tracing is off. */
  readonly context: Context | undefined;
  readonly startedAt: number;
}

/** A live turn's own marks: which provider and model, whether its first delta came, the open provider call. */
interface TurnScope extends Scope {
  readonly provider: string;
  readonly model: string;
  firstDelta: boolean;
  providerCall: Span | undefined;
}

const scopes = new WeakMap<object, Scope>();

/** The app's onRequest: the request's span (SERVER), ended with its status as the response closes. */
export function traceRequest(
  tracing: Tracing,
  raw: IncomingMessage,
  method: string,
  route: string | undefined,
  response: { statusCode: number; once(e: 'close', f: () => void): unknown },
): void {
  const startedAt = performance.now();
  const { tracer, api } = tracing;
  if (tracer === undefined || api === undefined) {
    scopes.set(raw, { tracing, context: undefined, startedAt });
    return;
  }
  const name = route === undefined ? method : `${method} ${route}`;
  const span = tracer.startSpan(name, {
    kind: api.SpanKind.SERVER,
    attributes: { 'http.request.method': method, ...(route === undefined ? {} : { 'http.route': route }) },
  });
  scopes.set(raw, { tracing, context: api.trace.setSpan(api.context.active(), span), startedAt });
  response.once('close', () => {
    span.setAttribute('http.response.status_code', response.statusCode);
    if (response.statusCode >= 500) span.setStatus({ code: api.SpanStatusCode.ERROR });
    span.end();
  });
}

/** `owner`'s spans hang off `from`'s from now on (a lease claim, a live turn, of their request). */
export function bindTrace(owner: object, from: object): void {
  const scope = scopes.get(from);
  if (scope !== undefined) scopes.set(owner, scope);
}

/** A turn's own scope: its provider and model (time to first delta is recorded per them). */
export function traceTurn(live: object, from: object, provider: string, model: string): void {
  const scope = scopes.get(from);
  if (scope === undefined) return;
  const turn: TurnScope = { ...scope, provider, model, firstDelta: false, providerCall: undefined };
  scopes.set(live, turn);
}

/** `work` as a child span `name` of `owner`'s request: ended when it settles, an error when it fails. Returns `work`. */
export function traced<T>(owner: object, name: string, work: Promise<T>, attributes?: Attributes): Promise<T> {
  const scope = scopes.get(owner);
  const api = scope?.tracing.api;
  if (scope?.tracing.tracer === undefined || api === undefined) return work;
  const span = scope.tracing.tracer.startSpan(name, attributes === undefined ? {} : { attributes }, scope.context);
  if (name === PROVIDER_CALL && isTurn(scope)) scope.providerCall = span;
  work.then(
    () => span.end(),
    (err: unknown) => {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    },
  );
  return work;
}

/** The span of a provider call, to its first byte (relay.ts). */
export const PROVIDER_CALL = 'advisor.provider_call';

function isTurn(scope: Scope): scope is TurnScope {
  return 'provider' in scope;
}

/**
 * The turn's first delta is logged: the time to first delta observed (per provider and model), and a
 * span `advisor.first_delta` from the first provider call's first byte (or the request) to it.
 */
export function firstDelta(live: object): void {
  const scope = scopes.get(live);
  if (scope === undefined || !isTurn(scope) || scope.firstDelta) return;
  scope.firstDelta = true;
  const now = performance.now();
  scope.tracing.metrics.timeToFirstDelta.observe({ provider: scope.provider, model: scope.model }, (now - scope.startedAt) / 1000);
  const tracer = scope.tracing.tracer;
  if (tracer === undefined) return;
  const from = scope.providerCall as (Span & { endTime?: [number, number] }) | undefined;
  const start = from?.endTime ?? performance.timeOrigin + scope.startedAt;
  const attributes = { 'advisor.provider': scope.provider, 'advisor.model': scope.model, 'advisor.time_to_first_delta_ms': Math.round(now - scope.startedAt) };
  tracer.startSpan('advisor.first_delta', { startTime: start, attributes }, scope.context).end();
}

/** The turn's end: a failure of the provider counted (advisor_provider_errors_total) and set on the request's span. */
export function turnEnded(live: object, providerError: string | undefined): void {
  const scope = scopes.get(live);
  if (scope === undefined || !isTurn(scope) || providerError === undefined || providerError === 'INTERNAL') return;
  scope.tracing.metrics.providerErrors.inc({ provider: scope.provider, code: providerError });
  if (scope.context !== undefined) scope.tracing.api?.trace.getSpan(scope.context)?.setAttribute('advisor.error_code', providerError);
}
