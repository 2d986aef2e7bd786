// DESIGN §12: the frame log, on each store, as two instances sharing it use it.
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'kysely';
import { gate } from '../../test/helpers/events.ts';
import { ManualClock } from '../../test/helpers/manual-clock.ts';
import { createDb, type DbHandle } from '../db/create-db.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { FrameLog, type FrameLogOptions, type FrameSink } from './frame-log.ts';
import type { Frame } from './frames.ts';
import type { FrameStore } from './frame-store.ts';
import { createMemoryFrameStore } from './memory-frame-store.ts';
import { createPgFrameStore } from './pg-frame-store.ts';
import { createRedisFrameStore } from './redis-frame-store.ts';
import { closeRedis, openRedis } from './redis-connection.ts';
import { REDIS_UNDER_TEST, deleteKeys, openReadyRedis } from '../../test/helpers/redis.ts';
import type { RedisEndpoint } from '../config.ts';

const { DATABASE_URL } = process.env;

// A follower on another instance gives a writer up after 3 heartbeats without a frame; these writers
// show no other sign of life, so the window must be far above any pause a busy machine puts between
// two of their frames.
const HEARTBEAT_MS = 500;
const OPTS: Omit<FrameLogOptions, 'retentionMs' | 'maxBytes'> = { maxDurationMs: 60_000, heartbeatMs: HEARTBEAT_MS, onError: () => undefined };

/** Two instances' frame logs over one store. */
interface Instances {
  readonly a: FrameLog;
  readonly b: FrameLog;
  /** Lets `ms` of log time pass. */
  elapse(ms: number): Promise<void>;
  close(): Promise<void>;
}

interface Backend {
  readonly name: string;
  /** Frames are seen by the other instance only through the store (not in the same process's memory). */
  readonly shared: boolean;
  before?(): Promise<void>;
  after?(): Promise<void>;
  open(opts: { retentionMs: number; maxBytes: number }): Promise<Instances>;
  /** A store of the backend on its own (closed by the caller). */
  store(): Promise<FrameStore>;
}

const memory: Backend = {
  name: 'memory',
  shared: false,
  async open(o) {
    const clock = new ManualClock();
    const log = new FrameLog(
      createMemoryFrameStore(clock, () => undefined),
      { ...OPTS, ...o },
    );
    return { a: log, b: log, elapse: async (ms) => clock.advance(ms), close: () => log.close() };
  },
  store: async () => createMemoryFrameStore(new ManualClock(), () => undefined),
};

function pgBackend(url: string): Backend {
  const schema = `test_frames_${randomBytes(6).toString('hex')}`;
  let handle: DbHandle | undefined;
  return {
    name: 'PostgreSQL',
    shared: true,
    async before() {
      handle = await createDb({ databaseUrl: url, schema });
      await migrateToLatest(handle.db);
    },
    async after() {
      if (!handle) return;
      await sql`drop schema ${sql.id(schema)} cascade`.execute(handle.db);
      await handle.close();
    },
    async open(o) {
      if (!handle) throw new Error('not set up');
      const clock = new ManualClock(new Date());
      const db = handle.db;
      const store = (): FrameStore => createPgFrameStore({ db, listenUrl: url, clock, onError: () => undefined });
      const [a, b] = [new FrameLog(store(), { ...OPTS, ...o }), new FrameLog(store(), { ...OPTS, ...o })];
      await Promise.all([a.ready(5000), b.ready(5000)]);
      return { a, b, elapse: async (ms) => clock.advance(ms), close: async () => void (await Promise.all([a.close(), b.close()])) };
    },
    async store() {
      if (!handle) throw new Error('not set up');
      return createPgFrameStore({ db: handle.db, listenUrl: url, clock: new ManualClock(new Date()), onError: () => undefined });
    },
  };
}

function redisBackend(url: RedisEndpoint): Backend {
  const prefix = `test:frames:${randomBytes(6).toString('hex')}:`;
  return {
    name: url.clusterNodes ? 'Redis Cluster' : 'Redis',
    shared: true,
    async after() {
      await deleteKeys(url, prefix);
    },
    async open(o) {
      const [ca, cb] = [openRedis(url), openRedis(url)];
      const a = new FrameLog(createRedisFrameStore({ client: ca, prefix, onError: () => undefined }), { ...OPTS, ...o });
      const b = new FrameLog(createRedisFrameStore({ client: cb, prefix, onError: () => undefined }), { ...OPTS, ...o });
      await Promise.all([a.ready(5000), b.ready(5000)]);
      // PEXPIRE is timed by Redis: real time.
      return {
        a,
        b,
        elapse: (ms) => delay(ms + 50),
        close: async () => {
          await Promise.all([a.close(), b.close()]);
          await Promise.all([closeRedis(ca), closeRedis(cb)]);
        },
      };
    },
    async store() {
      const c = await openReadyRedis(url);
      const store = createRedisFrameStore({ client: c, prefix, onError: () => undefined });
      return { ...store, close: async () => (await store.close(), await closeRedis(c)) };
    },
  };
}

const backends: Backend[] = [memory];
if (DATABASE_URL) backends.push(pgBackend(DATABASE_URL));
if (REDIS_UNDER_TEST) backends.push(redisBackend(REDIS_UNDER_TEST));

/** A client: the frames it got; `cutAfter` closes it once it has that frame id. */
function client(cutAfter = Infinity): { sink: FrameSink; frames: Frame[]; signal: AbortSignal; ids: () => number[]; events: () => string[] } {
  const frames: Frame[] = [];
  const gone = new AbortController();
  return {
    frames,
    signal: gone.signal,
    sink: {
      write(batch) {
        for (const f of batch) {
          if (gone.signal.aborted) return true;
          frames.push(f);
          if (f.id >= cutAfter) gone.abort();
        }
        return true;
      },
      drained: async () => undefined,
    },
    ids: () => frames.map((f) => f.id),
    events: () => frames.map((f) => /event: (\w+)/.exec(f.wire)?.[1] ?? ''),
  };
}

const noEvents = { stop: () => undefined, attached: () => undefined };

const frame = (id: number, event = 'delta', data = `{"text":"${id} "}`): Frame => ({ id, wire: `id: ${id}\nevent: ${event}\ndata: ${data}\n\n` });
const frames = (from: number, to: number): Frame[] => range(from, to).map((id) => frame(id));

/**
 * A store whose writes go wrong the way a store under faults does: the `timeOut` writes (by number)
 * land and then fail to their writer (a reply lost, a command timed out yet run when the store woke);
 * the first write carrying frame `loseAt` is answered written and dropped (the store restarted empty
 * just after), and `lost` settles then. The loss is chosen by its frame, not its number: how many
 * writes a turn takes depends on how busy the machine is, and a lost terminal write would leave
 * nothing after it to notice the loss.
 */
function faulty(store: FrameStore, faults: { timeOut: Set<number>; loseAt: number }): { store: FrameStore; lost: Promise<void> } {
  let n = 0;
  const lost = gate();
  let losing = true;
  return {
    lost: lost.opened,
    store: {
      ...store,
      async write(turnId, batch, ttlMs, notify) {
        n++;
        if (losing && batch.frames.some((f) => f.id === faults.loseAt)) {
          losing = false;
          lost.open();
          return { kind: 'written' };
        }
        const outcome = await store.write(turnId, batch, ttlMs, notify);
        if (faults.timeOut.has(n)) throw new Error('command timed out');
        return outcome;
      },
    },
  };
}

/** What a store was asked to send watchers: each write's `notify` (with its batch's last id), and bare notices. */
interface Told {
  readonly writes: { readonly last: number; readonly end: boolean; readonly notify: boolean }[];
  notices: number;
}

/**
 * A store that records what it is asked to tell watchers; control messages of kind `attach` reach the
 * instance only once `attachArrives` opens (an announce still on its way while the follower reads).
 */
function telling(store: FrameStore, attachArrives?: Promise<void>): { store: FrameStore; told: Told; written: (id: number) => Promise<void> } {
  const told: Told = { writes: [], notices: 0 };
  const waiters: { id: number; done: () => void }[] = [];
  return {
    told,
    written: (id) => new Promise((done) => waiters.push({ id, done })),
    store: {
      ...store,
      async write(turnId, batch, ttlMs, notify) {
        const outcome = await store.write(turnId, batch, ttlMs, notify);
        const last = batch.frames.at(-1)?.id ?? batch.after;
        told.writes.push({ last, end: batch.end, notify });
        for (const w of waiters.splice(0))
          if (w.id <= last) w.done();
          else waiters.push(w);
        return outcome;
      },
      async notify(turnId) {
        told.notices++;
        await store.notify(turnId);
      },
      onControl(handler) {
        store.onControl((m) => (m.kind === 'attach' && attachArrives !== undefined ? void attachArrives.then(() => handler(m)) : handler(m)));
      },
    },
  };
}

/** The text a client assembles from its frames: deltas appended, a snapshot replacing what came before. */
function assembled(got: readonly Frame[]): string {
  let text = '';
  for (const f of got) {
    const event = /event: (\w+)/.exec(f.wire)?.[1];
    const data = JSON.parse(/data: (.*)/.exec(f.wire)?.[1] ?? '{}') as { text?: string };
    if (event === 'delta') text += data.text ?? '';
    if (event === 'snapshot') text = data.text ?? '';
  }
  return text;
}
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

for (const backend of backends) {
  describe(`frame log on ${backend.name} (DESIGN §12)`, () => {
    before(async () => backend.before?.());
    after(async () => backend.after?.());

    test('DESIGN §12: a client attaching on another instance gets the frames after its Last-Event-ID, then live ones, and ends after the terminal frame', async () => {
      const inst = await backend.open({ retentionMs: 60_000, maxBytes: 1 << 20 });
      try {
        const turnId = randomUUID();
        const log = inst.a.open(turnId, () => '{}', noEvents);
        for (let i = 1; i <= 5; i++) log.append('delta', `{"text":"${i}"}`);
        await delay(20);
        const c = client();
        const following = inst.b.follow(turnId, 2, c.sink, { live: true, signal: c.signal });
        await delay(30);
        log.append('delta', '{"text":"6"}');
        log.end('done', '{}');
        assert.equal(await following, 'ended');
        assert.deepEqual(c.ids(), [3, 4, 5, 6, 7]);
        assert.deepEqual(c.events(), ['delta', 'delta', 'delta', 'delta', 'done']);
      } finally {
        await inst.close();
      }
    });

    test('DESIGN §12 exactness (property): clients cut at random frames and resumed from their last id, on either instance, see every frame once, in order, with the same ids', async () => {
      const inst = await backend.open({ retentionMs: 60_000, maxBytes: 1 << 20 });
      try {
        for (let trial = 0; trial < 12; trial++) {
          const turnId = randomUUID();
          const total = 20 + Math.floor(Math.random() * 40);
          const log = inst.a.open(turnId, () => '{}', noEvents);
          log.append('start', '{}');
          // The turn writes on at its own pace while the client comes and goes.
          const writing = (async () => {
            for (let i = 2; i < total; i++) {
              log.append('delta', `{"text":"${i}"}`);
              if (Math.random() < 0.3) await delay(Math.floor(Math.random() * 3));
            }
            log.end('done', '{}');
          })();
          const seen: number[] = [];
          let lastId = 0;
          for (let attempt = 0; attempt < 200; attempt++) {
            const cut = lastId + 1 + Math.floor(Math.random() * 8);
            const c = client(cut);
            const via = Math.random() < 0.5 ? inst.a : inst.b;
            const end = await via.follow(turnId, lastId, c.sink, { live: true, signal: c.signal });
            seen.push(...c.ids());
            lastId = c.ids().at(-1) ?? lastId;
            // A client cut in the middle of the last batch lost its end with the connection: it resumes.
            if (lastId === total) break;
            assert.ok(end === 'closed' || end === 'ended', end);
          }
          await writing;
          assert.deepEqual(seen, range(1, total), `trial ${trial}: ${total} frames`);
        }
      } finally {
        await inst.close();
      }
    });

    test('DESIGN §12 bound: beyond STREAM_LOG_MAX_BYTES the log keeps a snapshot; a client behind it gets one snapshot frame (the id of the last frame it covers), then the frames after', async () => {
      const inst = await backend.open({ retentionMs: 60_000, maxBytes: 1024 });
      try {
        const turnId = randomUUID();
        let text = '';
        const log = inst.a.open(turnId, () => JSON.stringify({ text }), noEvents);
        for (let i = 0; i < 40; i++) {
          const piece = `p${i}-${'x'.repeat(40)}`;
          text += piece;
          log.append('delta', JSON.stringify({ text: piece }));
        }
        log.end('done', '{}');
        await delay(50);
        const c = client();
        assert.equal(await inst.b.follow(turnId, 1, c.sink, { live: false, signal: c.signal }), 'ended');
        const [snap, ...rest] = c.frames;
        assert.ok(snap && /event: snapshot/.test(snap.wire), 'the first frame is the snapshot');
        const snapText = (JSON.parse(/data: (.*)/.exec(snap.wire)?.[1] ?? '{}') as { text: string }).text;
        // The snapshot plus the frames after it rebuild the whole reply, and the ids run on without a gap.
        const after = rest.filter((f) => /event: delta/.test(f.wire)).map((f) => (JSON.parse(/data: (.*)/.exec(f.wire)?.[1] ?? '{}') as { text: string }).text);
        assert.equal(snapText + after.join(''), text);
        assert.deepEqual(c.ids(), range(snap.id, 41));
        assert.ok(snap.id > 1);
        const held = c.frames.slice(1).reduce((n, f) => n + f.wire.length, 0);
        assert.ok(held <= 1024, `frames held beyond the snapshot: ${held} bytes`);
      } finally {
        await inst.close();
      }
    });

    test('DESIGN §12 retention: the log of an ended turn is gone after STREAM_LOG_RETENTION_MS (a follower finds no log)', async () => {
      // Redis times the retention itself, in real time: long enough that the first read comes well within it.
      const retentionMs = 2000;
      const inst = await backend.open({ retentionMs, maxBytes: 1 << 20 });
      try {
        const turnId = randomUUID();
        const log = inst.a.open(turnId, () => '{}', noEvents);
        log.append('delta', '{}');
        log.end('done', '{}');
        await delay(30);
        const kept = client();
        assert.equal(await inst.b.follow(turnId, 0, kept.sink, { live: false, signal: kept.signal }), 'ended');
        assert.deepEqual(kept.ids(), [1, 2]);
        await inst.elapse(retentionMs);
        const late = client();
        assert.equal(await inst.b.follow(turnId, 0, late.sink, { live: false, signal: late.signal }), 'missing');
        assert.deepEqual(late.ids(), []);
      } finally {
        await inst.close();
      }
    });

    test('DESIGN §12: a stop asked for on either instance reaches the turn', async () => {
      const inst = await backend.open({ retentionMs: 60_000, maxBytes: 1 << 20 });
      try {
        for (const asker of [inst.a, inst.b]) {
          const turnId = randomUUID();
          let stopped = 0;
          const log = inst.a.open(turnId, () => '{}', { stop: () => void stopped++, attached: () => undefined });
          await asker.requestStop(turnId);
          for (let i = 0; i < 3000 && stopped === 0; i++) await delay(10);
          assert.equal(stopped, 1, `asked on instance ${asker === inst.a ? 'a' : 'b'}`);
          log.end('done', '{}');
        }
      } finally {
        await inst.close();
      }
    });

    test('DESIGN §12 detach grace: a client attached on another instance counts for the running turn until it leaves', async () => {
      const inst = await backend.open({ retentionMs: 60_000, maxBytes: 1 << 20 });
      try {
        const turnId = randomUUID();
        const counts: number[] = [];
        const log = inst.a.open(turnId, () => '{}', { stop: () => undefined, attached: (n) => counts.push(n) });
        log.append('start', '{}');
        await delay(20);
        const c = client();
        const gone = new AbortController();
        const following = inst.b.follow(turnId, 0, c.sink, { live: true, signal: AbortSignal.any([c.signal, gone.signal]) });
        for (let i = 0; i < 3000 && log.attached === 0; i++) await delay(10);
        assert.equal(log.attached, 1);
        gone.abort();
        assert.equal(await following, 'closed');
        for (let i = 0; i < 3000 && log.attached === 1; i++) await delay(10);
        assert.equal(log.attached, 0);
        assert.deepEqual(counts, [1, 0]);
        log.end('done', '{}');
      } finally {
        await inst.close();
      }
    });

    test('DESIGN §12 under faults: a write sent again (retried, or run late) is refused as held — the log never holds an id twice', async () => {
      const store = await backend.store();
      try {
        const turnId = randomUUID();
        assert.deepEqual(await store.write(turnId, { after: 0, frames: frames(1, 3), end: false }, 60_000, false), { kind: 'written' });
        assert.deepEqual(await store.write(turnId, { after: 0, frames: frames(1, 3), end: false }, 60_000, false), { kind: 'held', top: 3 });
        // A retry that grew meanwhile (the old writer's way) is refused too.
        assert.deepEqual(await store.write(turnId, { after: 0, frames: frames(1, 6), end: false }, 60_000, false), { kind: 'held', top: 3 });
        assert.deepEqual(await store.write(turnId, { after: 3, frames: frames(4, 6), end: false }, 60_000, false), { kind: 'written' });
        assert.deepEqual(await store.write(turnId, { after: 3, frames: frames(4, 5), end: false }, 60_000, false), { kind: 'held', top: 6 });
        assert.deepEqual(
          (await store.read(turnId, 0))?.frames.map((f) => f.id),
          range(1, 6),
        );
        assert.deepEqual(
          (await store.read(turnId, 4))?.frames.map((f) => f.id),
          [5, 6],
        );
      } finally {
        await store.close();
      }
    });

    test('DESIGN §12 under faults: a write that does not follow what the log holds (its store lost frames) is refused as lost; a snapshot batch is taken', async () => {
      const store = await backend.store();
      try {
        const turnId = randomUUID();
        assert.deepEqual(await store.write(turnId, { after: 4, frames: frames(5, 6), end: false }, 60_000, false), { kind: 'lost' });
        assert.equal(await store.read(turnId, 0), undefined, 'nothing written');
        const snapshot = frame(6, 'snapshot', '{"text":"1 2 3 4 5 6 "}');
        assert.deepEqual(await store.write(turnId, { after: 4, snapshot, frames: frames(7, 8), end: false }, 60_000, false), { kind: 'written' });
        assert.deepEqual(await store.write(turnId, { after: 6, frames: frames(7, 7), end: false }, 60_000, false), { kind: 'held', top: 8 });
        assert.deepEqual(await store.write(turnId, { after: 9, frames: frames(10, 10), end: false }, 60_000, false), { kind: 'lost' }, 'a gap is refused');
        const read = await store.read(turnId, 0);
        assert.deepEqual(
          read?.frames.map((f) => f.id),
          [6, 7, 8],
        );
        assert.equal(assembled(read?.frames ?? []), '1 2 3 4 5 6 7 8 ');
      } finally {
        await store.close();
      }
    });

    test('DESIGN §12 under faults: writes that time out after landing, and a log its store lost mid-turn — a follower and a resume from 0 each see ids only rising and assemble exactly the reply', async () => {
      const store = await backend.store();
      const LOSE_AT = 40;
      const faults = faulty(store, { timeOut: new Set([2, 3, 6]), loseAt: LOSE_AT });
      const writer = new FrameLog(faults.store, { ...OPTS, retentionMs: 60_000, maxBytes: 1 << 20 });
      // The reader is another instance, on the same store (this process's own, for the in-memory store).
      const reader = new FrameLog(backend.shared ? await backend.store() : store, { ...OPTS, retentionMs: 60_000, maxBytes: 1 << 20 });
      let beat: NodeJS.Timeout | undefined;
      try {
        await Promise.all([writer.ready(5000), reader.ready(5000)]);
        const turnId = randomUUID();
        let text = '';
        const log = writer.open(turnId, () => JSON.stringify({ text }), noEvents);
        // The running turn's heartbeat, while its writes are retried.
        beat = setInterval(() => log.alive(), HEARTBEAT_MS / 2);
        log.append('start', '{}');
        const c = client();
        const following = reader.follow(turnId, 0, c.sink, { live: true, signal: c.signal });
        for (let i = 2; i <= 80; i++) {
          text += `${i} `;
          log.append('delta', `{"text":"${i} "}`);
          // The turn goes on only once the store has lost the write carrying this frame: mid-turn.
          if (i === LOSE_AT) await faults.lost;
          else if (i % 4 === 0) await delay(25);
        }
        log.end('done', '{}');
        assert.equal(await following, 'ended');
        clearInterval(beat);
        const resumed = client();
        assert.equal(await reader.follow(turnId, 0, resumed.sink, { live: true, signal: resumed.signal }), 'ended');
        for (const got of [c, resumed]) {
          const ids = got.ids();
          assert.ok(
            ids.every((id, i) => i === 0 || id > (ids[i - 1] ?? 0)),
            `ids rise: ${ids.join(',')}`,
          );
          assert.equal(ids.at(-1), 81);
          assert.equal(assembled(got.frames), text);
        }
      } finally {
        clearInterval(beat);
        await Promise.all([writer.close(), reader.close()]);
      }
    });

    test('DESIGN §12 cost: a turn nobody follows from another instance sends its watchers nothing — no notice with its writes (but the terminal one), none with its heartbeat — and every frame reaches the store', async () => {
      const store = await backend.store();
      const t = telling(store);
      const log0 = new FrameLog(t.store, { ...OPTS, retentionMs: 60_000, maxBytes: 1 << 20 });
      try {
        const turnId = randomUUID();
        const log = log0.open(turnId, () => '{}', noEvents);
        log.append('start', '{}');
        for (let i = 2; i <= 10; i++) {
          log.append('delta', `{"text":"${i} "}`);
          log.alive();
          await delay(40);
        }
        const ended = t.written(11);
        log.end('done', '{}');
        await ended;
        assert.deepEqual(
          t.told.writes.map((w) => w.notify),
          t.told.writes.map((w) => w.end),
          JSON.stringify(t.told.writes),
        );
        assert.equal(t.told.notices, 0);
        assert.deepEqual(
          (await store.read(turnId, 0))?.frames.map((f) => f.id),
          range(1, 11),
        );
      } finally {
        await log0.close();
      }
    });

    if (backend.shared) {
      test('DESIGN §12: a follower attaching elsewhere is told at once to look again — a write that landed after its first read, sent with no notice (nobody followed yet), reaches it without waiting for a heartbeat; later writes and heartbeats carry notices', async () => {
        // A heartbeat far beyond the test: only a notice can wake the follower in time.
        const opts = { ...OPTS, heartbeatMs: 120_000, retentionMs: 60_000, maxBytes: 1 << 20 };
        const attach = gate();
        const w = telling(await backend.store(), attach.opened);
        const readerStore = await backend.store();
        const firstRead = gate();
        const writer = new FrameLog(w.store, opts);
        const reader = new FrameLog(
          {
            ...readerStore,
            async read(turnId, after) {
              const got = await readerStore.read(turnId, after);
              firstRead.open();
              return got;
            },
          },
          opts,
        );
        try {
          await Promise.all([writer.ready(5000), reader.ready(5000)]);
          const turnId = randomUUID();
          const log = writer.open(turnId, () => '{}', noEvents);
          log.append('start', '{}');
          const c = client();
          const following = reader.follow(turnId, 0, c.sink, { live: true, signal: c.signal });
          await firstRead.opened;
          // The race: frames written after the follower's read, before its announce reached the writer.
          for (let i = 2; i <= 4; i++) log.append('delta', `{"text":"${i} "}`);
          await w.written(4);
          assert.ok(
            w.told.writes.every((x) => !x.notify),
            JSON.stringify(w.told.writes),
          );
          attach.open();
          for (let i = 0; i < 3000 && (c.ids().at(-1) ?? 0) < 4; i++) await delay(10);
          assert.deepEqual(c.ids(), range(1, 4));
          assert.equal(w.told.notices, 1, 'one notice, at once');
          // Followed now: the writes carry notices, and the heartbeat sends a sign of life.
          log.append('delta', '{"text":"5 "}');
          await w.written(5);
          assert.equal(w.told.writes.at(-1)?.notify, true);
          log.alive();
          assert.equal(w.told.notices, 2);
          log.end('done', '{}');
          assert.equal(await following, 'ended');
          assert.deepEqual(c.ids(), range(1, 6));
        } finally {
          await Promise.all([writer.close(), reader.close()]);
        }
      });

      test('DESIGN §12: a client following a turn whose instance is gone (no frame, no sign of life) ends within 3 heartbeats instead of hanging', async () => {
        const inst = await backend.open({ retentionMs: 60_000, maxBytes: 1 << 20 });
        try {
          const turnId = randomUUID();
          const log = inst.a.open(turnId, () => '{}', noEvents);
          log.append('start', '{}');
          await delay(30);
          const c = client();
          const started = Date.now();
          // The writer stops writing and showing signs of life, as a killed instance would.
          assert.equal(await inst.b.follow(turnId, 0, c.sink, { live: true, signal: c.signal }), 'silent');
          assert.ok(Date.now() - started < 6 * HEARTBEAT_MS, `ended after ${Date.now() - started} ms`);
          assert.deepEqual(c.ids(), [1]);
        } finally {
          await inst.close();
        }
      });
    }
  });
}
