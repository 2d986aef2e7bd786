import pg from 'pg';
import { sql } from 'kysely';
import type { Db } from '../db/types.ts';
import type { Clock } from './clock.ts';
import type { ControlMessage, Frame, FrameStore, StoredFrames } from './frame-log.ts';

const FRAMES_CHANNEL = 'advisor_frames';
const CONTROL_CHANNEL = 'advisor_control';
const RECONNECT_MS = 1000;
const CLEANUP_MS = 60_000;

export interface PgFrameStoreOptions {
  readonly db: Db;
  /** For the instance's one listening connection (LISTEN needs a connection of its own). */
  readonly databaseUrl: string;
  readonly clock: Clock;
  readonly onError: (err: unknown) => void;
}

/**
 * Frame logs in PostgreSQL (`stream_logs`, `stream_frames`; migration 0016) for deployments without
 * Redis: a write is one statement that stores the frames and sends the notice (NOTIFY is delivered
 * at commit, so a woken reader finds the frames); control messages go by NOTIFY too. Expired logs
 * are deleted every minute.
 */
export function createPgFrameStore(opts: PgFrameStoreOptions): FrameStore {
  const { db, clock } = opts;
  const watchers = new Map<string, Set<() => void>>();
  let handler: (m: ControlMessage) => void = () => undefined;
  let listener: pg.Client | undefined;
  let closed = false;
  let listening: Promise<void> = connect();

  async function connect(): Promise<void> {
    const client = new pg.Client({ connectionString: opts.databaseUrl });
    client.on('notification', (n) => {
      if (n.channel === CONTROL_CHANNEL) {
        try {
          handler(JSON.parse(n.payload ?? '') as ControlMessage);
        } catch (err) {
          opts.onError(err);
        }
      } else {
        for (const wake of watchers.get(n.payload ?? '') ?? []) wake();
      }
    });
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
    async write(turnId, batch, ttlMs) {
      const expiresAt = new Date(clock.now().getTime() + ttlMs);
      const frames = batch.snapshot ? [batch.snapshot, ...batch.frames] : batch.frames;
      const last = batch.frames.at(-1)?.id;
      const ids = frames.map((f) => f.id);
      const wires = frames.map((f) => f.wire);
      const terminal = frames.map((f) => batch.end && f.id === last);
      const cutBelow = batch.snapshot?.id ?? 0;
      await sql`
        with log as (
          insert into stream_logs (turn_id, expires_at) values (${turnId}, ${expiresAt})
          on conflict (turn_id) do update set expires_at = excluded.expires_at),
        cut as (delete from stream_frames where turn_id = ${turnId} and id < ${cutBelow}),
        ins as (
          insert into stream_frames (turn_id, id, wire, terminal)
          select ${turnId}, u.id, u.wire, u.terminal from unnest(${ids}::int[], ${wires}::text[], ${terminal}::bool[]) as u(id, wire, terminal)
          on conflict (turn_id, id) do update set wire = excluded.wire, terminal = excluded.terminal)
        select pg_notify(${FRAMES_CHANNEL}, ${turnId})`.execute(db);
    },
    async read(turnId, after): Promise<StoredFrames | undefined> {
      const { rows } = await sql<{ ended: boolean; id: number | null; wire: string | null }>`
        select l.ended, f.id, f.wire from (
          select turn_id,
            exists (select 1 from stream_frames t where t.turn_id = ${turnId} and t.terminal) as ended,
            (select min(id) from stream_frames m where m.turn_id = ${turnId}) as first
          from stream_logs where turn_id = ${turnId} and expires_at > ${clock.now()}) l
        left join lateral (
          select id, wire from stream_frames
          where turn_id = l.turn_id and id > case when ${after}::int < l.first then -1 else ${after}::int end
          order by id) f on true`.execute(db);
      const head = rows[0];
      if (head === undefined) return undefined;
      const frames: Frame[] = [];
      for (const r of rows) if (r.id !== null && r.wire !== null) frames.push({ id: r.id, wire: r.wire });
      return { frames, ended: head.ended };
    },
    async watch(turnId, wake) {
      await listening;
      let set = watchers.get(turnId);
      if (set === undefined) watchers.set(turnId, (set = new Set()));
      set.add(wake);
      return () => {
        set.delete(wake);
        if (set.size === 0) watchers.delete(turnId);
      };
    },
    async alive(turnId) {
      await sql`select pg_notify(${FRAMES_CHANNEL}, ${turnId})`.execute(db);
    },
    async publish(message) {
      await sql`select pg_notify(${CONTROL_CHANNEL}, ${JSON.stringify(message)})`.execute(db);
    },
    onControl(h) {
      handler = h;
    },
    ready: () => listening,
    async close() {
      closed = true;
      clearInterval(cleanup);
      watchers.clear();
      await listener?.end().catch(() => undefined);
    },
  };
}
