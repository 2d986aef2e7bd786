import type { Redis } from 'ioredis';
import type { ControlMessage, Frame, FrameStore, StoredFrames } from './frame-log.ts';
import { LuaScript, redisCall } from './redis-connection.ts';

// A turn's log is a Redis stream with one entry per write (a batch of frames): its id is the batch's
// last frame id (`N-0`), field `w` the frames' wire text, then `e` on the batch with the terminal frame
// or `s` on a snapshot. One entry per write keeps a fast provider's log at a few commands a second
// (an XADD per frame cost the relay half its rate). A compaction replaces the stream by its snapshot
// entry. Reading picks, atomically, everything when the id asked after is older than the snapshot,
// else the entries that hold frames after the id (the reader drops those up to it).
const READ = new LuaScript(`
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then return false end
local after = tonumber(ARGV[1])
local firstId = tonumber(string.match(first[1][1], '^(%d+)'))
if first[1][2][3] == 's' and after < firstId then return redis.call('XRANGE', KEYS[1], '-', '+') end
return redis.call('XRANGE', KEYS[1], string.format('%d-0', after + 1), '+')
`);

/** The frames of a batch's wire text (frames end with a blank line; a data line never holds one). */
function framesOf(wire: string): Frame[] {
  const out: Frame[] = [];
  for (let at = 0; at < wire.length; ) {
    const end = wire.indexOf('\n\n', at);
    const stop = end < 0 ? wire.length : end + 2;
    const text = wire.slice(at, stop);
    out.push({ id: Number.parseInt(text.slice(4), 10), wire: text });
    at = stop;
  }
  return out;
}

export interface RedisFrameStoreOptions {
  /** The instance's Redis connection; its owner closes it. */
  readonly client: Redis;
  /** Prepended to every key and channel. */
  readonly prefix: string;
  readonly onError: (err: unknown) => void;
}

type Entry = [string, string[]];

/**
 * Frame logs in Redis: a stream per turn (expiring after the retention), notices on a channel per
 * turn, control messages on one channel per deployment. Notices and control messages arrive on a
 * second connection of the instance, in subscriber mode (it re-subscribes by itself after a reconnect).
 */
export function createRedisFrameStore(opts: RedisFrameStoreOptions): FrameStore {
  const { client, prefix } = opts;
  const key = (turnId: string): string => `${prefix}fl:${turnId}`;
  const control = `${prefix}ctl`;
  const sub = client.duplicate({ enableOfflineQueue: true, lazyConnect: false });
  sub.on('error', opts.onError);
  const watchers = new Map<string, Set<() => void>>();
  let handler: (m: ControlMessage) => void = () => undefined;
  const ready = sub.subscribe(control).then(() => undefined);
  ready.catch((err: unknown) => opts.onError(err));
  sub.on('message', (channel: string, message: string) => {
    if (channel === control) {
      try {
        handler(JSON.parse(message) as ControlMessage);
      } catch (err) {
        opts.onError(err);
      }
      return;
    }
    for (const wake of watchers.get(channel) ?? []) wake();
  });

  return {
    async write(turnId, batch, ttlMs) {
      const k = key(turnId);
      await redisCall(client, (c) => {
        const m = c.multi();
        if (batch.snapshot) m.del(k).xadd(k, `${batch.snapshot.id}-0`, 'w', batch.snapshot.wire, 's', '1');
        const last = batch.frames.at(-1);
        if (last !== undefined) {
          let wire = '';
          for (const f of batch.frames) wire += f.wire;
          if (batch.end) m.xadd(k, `${last.id}-0`, 'w', wire, 'e', '1');
          else m.xadd(k, `${last.id}-0`, 'w', wire);
        }
        return m.pexpire(k, ttlMs).publish(k, 'f').exec();
      });
    },
    async read(turnId, after): Promise<StoredFrames | undefined> {
      const entries = (await redisCall(client, (c) => READ.run(c, [key(turnId)], [after]))) as Entry[] | null;
      if (entries === null) return undefined;
      const frames: Frame[] = [];
      let ended = false;
      for (const [, fields] of entries) {
        for (const f of framesOf(fields[1] ?? '')) if (f.id > after) frames.push(f);
        if (fields[2] === 'e') ended = true;
      }
      return { frames, ended };
    },
    async watch(turnId, wake) {
      const channel = key(turnId);
      let set = watchers.get(channel);
      if (set === undefined) {
        watchers.set(channel, (set = new Set()));
        await sub.subscribe(channel);
      }
      set.add(wake);
      return () => {
        set.delete(wake);
        if (set.size === 0 && watchers.get(channel) === set) {
          watchers.delete(channel);
          sub.unsubscribe(channel).catch(() => undefined);
        }
      };
    },
    async alive(turnId) {
      await redisCall(client, (c) => c.publish(key(turnId), 'p'));
    },
    async publish(message) {
      await redisCall(client, (c) => c.publish(control, JSON.stringify(message)));
    },
    onControl(h) {
      handler = h;
    },
    ready: () => ready,
    async close() {
      await ready.catch(() => undefined);
      watchers.clear();
      sub.disconnect();
    },
  };
}
