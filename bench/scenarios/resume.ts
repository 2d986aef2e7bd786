// DESIGN §12 rows: resuming a turn on another instance, stopping it from another instance, and the
// memory a detached turn holds. Two service processes share the run's PostgreSQL and Redis.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { Harness } from '../lib/harness.ts';
import { rssBytes } from '../lib/procs.ts';
import type { Row } from '../lib/report.ts';
import { saveKeysViaApi } from '../lib/seed.ts';
import { distribution, ms, int, median } from '../lib/stats.ts';
import { serviceStream, userIds } from './targets.ts';

/** A slow reply: long enough for every sample to find it still streaming. */
const SLOW = { chunks: Array.from({ length: 60 }, (_, i) => ` word${i}`), delayMs: 50 };

interface Pair {
  readonly a: string;
  readonly b: string;
  readonly agent: http.Agent;
  readonly stop: () => Promise<void>;
}

async function pair(h: Harness, name: string, env: Record<string, string> = {}): Promise<Pair & { aPid: number }> {
  const [a, b] = await Promise.all([h.startService(`${name}-a`, env), h.startService(`${name}-b`, env)]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  return { a: a.ready, b: b.ready, aPid: a.pid, agent, stop: async () => void (agent.destroy(), await Promise.all([a.stop(), b.stop()])) };
}

/** Starts a turn on `url`; resolves with its conversation once `deltas` deltas arrived, and the request to cut. */
function startTurn(url: string, token: string, deltas: number, agent: http.Agent): Promise<{ conversationId: string; lastId: number; cut: () => void; done: Promise<string> }> {
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
          const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
          resolve({ conversationId, lastId: ids.at(-1) ?? 0, cut: () => req.destroy(), done });
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

export async function resume(h: Harness): Promise<Row> {
  const samples = h.quick ? 30 : 200;
  await h.script(SLOW);
  const p = await pair(h, 'service-resume');
  try {
    const users = userIds('resume', 20);
    const tokens = await Promise.all(users.map((u) => h.token(u)));
    await saveKeysViaApi(p.a, tokens, 10);
    const times: number[] = [];
    // 20 users, each with one live turn at a time: resumed on the other instance from frame 2 (its
    // frames 3.. are replayed from the shared log, then live), then stopped.
    for (let i = 0; i < samples; i += tokens.length) {
      await Promise.all(
        tokens.map(async (token, k) => {
          if (i + k >= samples) return;
          const turn = await startTurn(p.a, token, 4, p.agent);
          times.push(await timeToFirstFrame(p.b, token, turn.conversationId, 2, p.agent));
          await stopVia(p.b, token, turn.conversationId, p.agent);
          await turn.done;
        }),
      );
    }
    const d = distribution(times);
    return {
      id: 'resume',
      title: 'Time to resume on another instance',
      service: `p50 ${ms(d.p50)} ms · p99 ${ms(d.p99)} ms`,
      baseline: 'none (a reply used to die with its connection)',
      result: `${samples} resumes`,
      goal: 'reported',
      met: undefined,
      how:
        `Two service processes (Redis + PostgreSQL); 20 users each start a slow turn (60 deltas, 50 ms apart) on instance A; after its ` +
        `4th delta the same user attaches on instance B with \`Last-Event-ID: 2\`; the time is from sending the GET to receiving frame 3 ` +
        `(replayed from the Redis log). ${samples} samples, 20 at a time.`,
    };
  } finally {
    await p.stop();
  }
}

async function stopVia(url: string, token: string, conversationId: string, agent: http.Agent): Promise<number> {
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request(new URL(`/api/advisor/conversations/${conversationId}/stop`, url), { method: 'POST', agent, headers: { authorization: `Bearer ${token}` } });
    req.on('response', resolve);
    req.on('error', reject);
    req.end();
  });
  res.resume();
  return res.statusCode ?? 0;
}

export async function stop(h: Harness): Promise<Row> {
  const samples = h.quick ? 30 : 200;
  await h.script(SLOW);
  const p = await pair(h, 'service-stop');
  try {
    const users = userIds('stop', 20);
    const tokens = await Promise.all(users.map((u) => h.token(u)));
    await saveKeysViaApi(p.a, tokens, 10);
    const times: number[] = [];
    for (let i = 0; i < samples; i += tokens.length) {
      await Promise.all(
        tokens.map(async (token, k) => {
          if (i + k >= samples) return;
          const turn = await startTurn(p.a, token, 3, p.agent);
          const asked = performance.now();
          const code = await stopVia(p.b, token, turn.conversationId, p.agent);
          if (code !== 202) throw new Error(`stop answered ${code}`);
          const text = await turn.done;
          if (!text.includes('"finishReason":"stopped"')) throw new Error('the turn did not end stopped');
          times.push(performance.now() - asked);
        }),
      );
    }
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
        `${samples} samples, 20 at a time.`,
    };
  } finally {
    await p.stop();
  }
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
    const rest = await sampleRss(service.pid);
    const started = await Promise.all(tokens.map((t) => startTurn(service.ready, t, 2, agent)));
    for (const s of started) s.cut();
    await delay(2000);
    const held = await sampleRss(service.pid);
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
      notes: [median([perTurn]) > 0 ? '' : 'RSS did not grow measurably'].filter(Boolean),
    };
  } finally {
    agent.destroy();
    await service.stop();
  }
}

async function sampleRss(pid: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    samples.push(rssBytes(pid));
    await delay(100);
  }
  return median(samples);
}
