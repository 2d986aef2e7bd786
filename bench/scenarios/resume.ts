// DESIGN §12 rows: resuming a turn on another instance, stopping it from another instance, and the
// memory a detached turn holds. Two service processes share the run's PostgreSQL and Redis.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { Harness } from '../lib/harness.ts';
import { sampleRss } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import { distribution, int, ms } from '../lib/stats.ts';
import { serviceStream, userIds } from './targets.ts';

/** A slow reply: long enough for every sample to find it still streaming. */
const SLOW = { chunks: Array.from({ length: 60 }, (_, i) => ` word${i}`), delayMs: 50 };

interface Pair {
  readonly a: string;
  readonly b: string;
  readonly agent: http.Agent;
  readonly stop: () => Promise<void>;
}

async function pair(h: Harness, name: string): Promise<Pair> {
  const [a, b] = await Promise.all([h.startService(`service-${name}-a`), h.startService(`service-${name}-b`)]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  return { a: a.ready, b: b.ready, agent, stop: async () => void (agent.destroy(), await Promise.all([a.stop(), b.stop()])) };
}

interface StartedTurn {
  readonly conversationId: string;
  /** Cuts the turn's own connection. */
  readonly cut: () => void;
  /** The whole body once the response ended (or was cut). */
  readonly done: Promise<string>;
}

/** Starts a turn on `url`; resolves once `deltas` deltas arrived. */
function startTurn(url: string, token: string, deltas: number, agent: http.Agent): Promise<StartedTurn> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ text: 'How did my last trade go?', clientMessageId: crypto.randomUUID() });
    const req = http.request(new URL('/api/advisor/conversations/new/messages/stream', url), {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    let text = '';
    let seen = 0;
    let resolved = false;
    let resolveDone: (s: string) => void = () => undefined;
    const done = new Promise<string>((r) => (resolveDone = r));
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        seen = text.split('event: delta').length - 1;
        if (!resolved && seen >= deltas) {
          resolved = true;
          const conversationId = /"conversationId":"([^"]+)"/.exec(text)?.[1] ?? '';
          resolve({ conversationId, cut: () => req.destroy(), done });
        }
      });
      res.on('end', () => resolveDone(text));
      res.on('close', () => resolveDone(text));
    });
    req.on('error', (err) => (resolved ? resolveDone(text) : reject(err)));
    req.end(body);
  });
}

/** GET …/stream on `url` after `lastId`; resolves with the time to its first frame (ms), then the connection is closed. */
function timeToFirstFrame(url: string, token: string, conversationId: string, lastId: number, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.get(new URL(`/api/advisor/conversations/${conversationId}/stream`, url), {
      agent,
      headers: { authorization: `Bearer ${token}`, 'last-event-id': String(lastId) },
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) return reject(new Error(`attach answered ${res.statusCode}`));
      res.on('data', (chunk: Buffer) => {
        if (!chunk.includes(`id: ${lastId + 1}\n`)) return;
        resolve(performance.now() - started);
        req.destroy();
      });
    });
    req.on('error', () => undefined);
  });
}

/**
 * `samples` times, 20 users at a time: a slow turn on instance A, then `measure` (which may use
 * instance B) once it has `deltas` deltas; the turn is let run to its end. Returns the timings.
 */
async function acrossInstances(
  h: Harness,
  name: string,
  deltas: number,
  measure: (p: Pair, token: string, turn: StartedTurn) => Promise<number>,
): Promise<number[]> {
  const samples = h.quick ? 30 : 200;
  await h.script(SLOW);
  const p = await pair(h, name);
  try {
    const tokens = await Promise.all(userIds(name, 20).map((u) => h.token(u)));
    await saveKeysViaApi(p.a, tokens, 10);
    const times: number[] = [];
    for (let i = 0; i < samples; i += tokens.length) {
      await Promise.all(
        tokens.slice(0, samples - i).map(async (token) => {
          const turn = await startTurn(p.a, token, deltas, p.agent);
          times.push(await measure(p, token, turn));
          await turn.done;
        }),
      );
    }
    return times;
  } finally {
    await p.stop();
  }
}

export async function resume(h: Harness): Promise<Row> {
  // Resumed on the other instance from frame 2 (frames 3.. replayed from the shared log, then live), then stopped.
  const times = await acrossInstances(h, 'resume', 4, async (p, token, turn) => {
    const took = await timeToFirstFrame(p.b, token, turn.conversationId, 2, p.agent);
    await stopVia(p.b, token, turn.conversationId, p.agent);
    return took;
  });
  const d = distribution(times);
  return {
    id: 'resume',
    title: 'Time to resume on another instance',
    service: `p50 ${ms(d.p50)} ms · p99 ${ms(d.p99)} ms`,
    baseline: 'none (a reply used to die with its connection)',
    result: `${times.length} resumes`,
    goal: 'reported',
    met: undefined,
    how:
      `Two service processes (Redis + PostgreSQL); 20 users each start a slow turn (60 deltas, 50 ms apart) on instance A; after its ` +
      `4th delta the same user attaches on instance B with \`Last-Event-ID: 2\`; the time is from sending the GET to receiving frame 3 ` +
      `(replayed from the Redis log). ${times.length} samples, 20 at a time.`,
  };
}

async function stopVia(url: string, token: string, conversationId: string, agent: http.Agent): Promise<number> {
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request(new URL(`/api/advisor/conversations/${conversationId}/stop`, url), {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${token}` },
    });
    req.on('response', resolve);
    req.on('error', reject);
    req.end();
  });
  res.resume();
  return res.statusCode ?? 0;
}

export async function stop(h: Harness): Promise<Row> {
  const times = await acrossInstances(h, 'stop', 3, async (p, token, turn) => {
    const asked = performance.now();
    const code = await stopVia(p.b, token, turn.conversationId, p.agent);
    if (code !== 202) throw new Error(`stop answered ${code}`);
    if (!(await turn.done).includes('"finishReason":"stopped"')) throw new Error('the turn did not end stopped');
    return performance.now() - asked;
  });
  const d = distribution(times);
  return {
    id: 'stop',
    title: 'Stop across instances',
    service: `p50 ${ms(d.p50)} ms · p99 ${ms(d.p99)} ms`,
    baseline: 'goal 1 s',
    result: `p99 ${ms(d.p99 / 1000, 3)} s`,
    goal: 'p99 ≤ 1 s',
    met: d.p99 <= 1000,
    how:
      'Two service processes (Redis + PostgreSQL); 20 users each start a slow turn on instance A; after its 3rd delta `POST …/stop` goes to ' +
      'instance B; the time is from sending the stop to the turn’s own client on A receiving `done` `finishReason: "stopped"` — which A ' +
      'writes after aborting the provider call and storing the reply, so it bounds the stop-to-upstream-closed time from above. ' +
      `${times.length} samples, 20 at a time.`,
  };
}

export async function detached(h: Harness): Promise<Row> {
  const turns = h.quick ? 50 : 200;
  // Long enough that no turn ends during the measure; the grace keeps them all running detached.
  await h.script({ chunks: Array.from({ length: 400 }, (_, i) => ` word${i}`), delayMs: 100 });
  const service = await h.startService('service-detached', { STREAM_DETACH_GRACE_MS: '600000' });
  const agent = new http.Agent({ keepAlive: true, maxSockets: turns });
  try {
    const users = userIds('detached', turns);
    const tokens = await Promise.all(users.map((u) => h.token(u)));
    await saveKeysViaApi(service.ready, tokens, 10);
    // Warm-up (JIT, pools), then the resting size.
    await Promise.all(tokens.slice(0, 10).map((t) => serviceStream(service.ready, t, agent).result.catch(() => undefined)));
    await delay(1000);
    const rest = await sampleRss(service.pid, 100);
    const started = await Promise.all(tokens.map((t) => startTurn(service.ready, t, 2, agent)));
    for (const s of started) s.cut();
    await delay(2000);
    const held = await sampleRss(service.pid, 100);
    const perTurn = (held - rest) / turns;
    return {
      id: 'detached',
      title: 'Memory per detached turn',
      service: `${int(perTurn / 1024)} KiB per turn (RSS)`,
      baseline: `rest ${int(rest / 1048576)} MiB`,
      result: `${turns} turns running with no client`,
      goal: 'reported',
      met: undefined,
      how:
        `One service process (Redis + PostgreSQL), STREAM_DETACH_GRACE_MS = 10 min; ${turns} users each start a slow turn (400 deltas, ` +
        '100 ms apart) and cut their connection after 2 deltas; 2 s later the RSS (median of 5 samples) is compared with the RSS before, ' +
        'after a warm-up; the difference over the number of turns. The turns then run on, logging to Redis, until the process stops.',
    };
  } finally {
    agent.destroy();
    await service.stop();
  }
}
