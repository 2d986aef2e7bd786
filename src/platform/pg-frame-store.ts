import pg from 'pg';
import { sql } from 'kysely';
import type { Db } from '../db/types.ts';
import type { Clock } from './clock.ts';
import { batchWire, framesOf, type Frame } from './frames.ts';
import { firstIdOf, Notices, type FrameStore, type StoredFrames, type WriteOutcome } from './frame-store.ts';

const FRAMES_CHANNEL = 'advisor_frames';
const CONTROL_CHANNEL = 'advisor_control';
const RECONNECT_MS = 1000;
const CLEANUP_MS = 60_000;

export interface PgFrameStoreOptions {
  readonly db: Db;
  /**
   * For the instance's one listening connection: LISTEN needs a session of its own, so behind a
   * transaction-mode pooler this names the database directly (DATABASE_LISTEN_URL).
   */
  readonly listenUrl: string;
  readonly clock: Clock;
  readonly onError: (err: unknown) => void;
}

/**
 * Frame logs in PostgreSQL (`stream_logs`, `stream_frames`; migration 0016) for deployments without
 * Redis: a write is one statement that judges it (frame-log.ts `judgeWrite`: the log's top is its
 * highest row id), stores its frames as one row (under its last frame id; a snapshot as another, the
 * rows before it deleted), sets the expiry when `setsExpiry` says (frame-store.ts) and, when asked,
 * sends the notice (NOTIFY is delivered at commit, so a woken reader finds the frames); a refused
 * write changes nothing. Control messages go by NOTIFY too.
 * Expired logs are deleted every minute.
 */
export function createPgFrameStore(opts: PgFrameStoreOptions): FrameStore {
  const { db, clock } = opts;
  const notices = new Notices(opts.onError);
  let listener: pg.Client | undefined;
  let closed = false;
  let listening: Promise<void> = connect();

  async function connect(): Promise<void> {
    const client = new pg.Client({ connectionString: opts.listenUrl });
    client.on('notification', (n) => (n.channel === CONTROL_CHANNEL ? notices.control(n.payload ?? '') : notices.notice(n.payload ?? '')));
    const again = (err?: unknown): void => {
      if (err) opts.onError(err);
      if (listener !== client || closed) return;
      listener = undefined;
      setTimeout(() => void (listening = connect().catch(() => undefined)), RECONNECT_MS).unref();
    };
    client.on('error', again);
    client.on('end', () => again());
    listener = client;
    try {
      await client.connect();
      await client.query(`listen ${FRAMES_CHANNEL}; listen ${CONTROL_CHANNEL}`);
    } catch (err) {
      again(err);
      client.end().catch(() => undefined);
      throw err;
    }
  }
  listening.catch(() => undefined);

  const cleanup = setInterval(() => {
    db.deleteFrom('stream_logs').where('expires_at', '<=', clock.now()).execute().catch(opts.onError);
  }, CLEANUP_MS).unref();

  return {
    async write(turnId, batch, ttlMs, notify): Promise<WriteOutcome> {
      const expiresAt = new Date(clock.now().getTime() + ttlMs);
      const rows = batch.snapshot ? [{ id: batch.snapshot.id, wire: batch.snapshot.wire, terminal: false }] : [];
      const last = batch.frames.at(-1);
      if (last !== undefined) rows.push({ id: last.id, wire: batchWire(batch.frames), terminal: batch.end });
      const cutBelow = batch.snapshot?.id ?? 0;
      const { rows: verdicts } = await sql<{ verdict: 'written' | 'held' | 'lost'; top: number }>`
        with held as (select coalesce((select max(id) from stream_frames where turn_id = ${turnId}), 0) as top),
        judged as (
          select top, case when top >= ${firstIdOf(batch)}::int then 'held'
                           when ${batch.snapshot === undefined} and top <> ${batch.after}::int then 'lost'
                           else 'written' end as verdict
          from held),
        log as (
          insert into stream_logs (turn_id, expires_at) select ${turnId}, ${expiresAt} from judged where verdict = 'written'
          on conflict (turn_id) do update set expires_at = excluded.expires_at
          where (select top from judged) = 0 or ${batch.snapshot !== undefined || batch.end}),
        cut as (delete from stream_frames where turn_id = ${turnId} and id < ${cutBelow} and (select verdict from judged) = 'written'),
        ins as (
          insert into stream_frames (turn_id, id, wire, terminal)
          select ${turnId}, u.id, u.wire, u.terminal
          from unnest(${rows.map((r) => r.id)}::int[], ${rows.map((r) => r.wire)}::text[], ${rows.map((r) => r.terminal)}::bool[]) as u(id, wire, terminal)
          where (select verdict from judged) = 'written'
          on conflict (turn_id, id) do nothing)
        select j.verdict, j.top from judged j
        left join lateral (select pg_notify(${FRAMES_CHANNEL}, ${turnId}) where j.verdict = 'written' and ${notify}) n on true`.execute(db);
      const v = verdicts[0];
      if (v === undefined) throw new Error('the frame-log write returned no verdict');
      return v.verdict === 'held' ? { kind: 'held', top: v.top } : { kind: v.verdict };
    },
    async read(turnId, after): Promise<StoredFrames | undefined> {
      // The rows above `after` hold every frame after it (the snapshot's among them when `after` is older).
      const { rows } = await sql<{ wire: string | null; terminal: boolean | null }>`
        select f.wire, f.terminal from stream_logs l
        left join stream_frames f on f.turn_id = l.turn_id and f.id > ${after}::int
        where l.turn_id = ${turnId} and l.expires_at > ${clock.now()}
        order by f.id`.execute(db);
      if (rows.length === 0) return undefined;
      const frames: Frame[] = [];
      for (const r of rows) if (r.wire !== null) framesOf(r.wire, after, frames);
      return { frames, ended: rows.some((r) => r.terminal === true) };
    },
    async watch(turnId, wake) {
      await listening;
      const watching = notices.watch(turnId, wake);
      return () => void watching.unwatch();
    },
    async notify(turnId) {
      await sql`select pg_notify(${FRAMES_CHANNEL}, ${turnId})`.execute(db);
    },
    async publish(message) {
      await sql`select pg_notify(${CONTROL_CHANNEL}, ${JSON.stringify(message)})`.execute(db);
    },
    onControl: (handler) => notices.onControl(handler),
    ready: () => listening,
    async close() {
      closed = true;
      clearInterval(cleanup);
      notices.clear();
      await listener?.end().catch(() => undefined);
    },
  };
}
