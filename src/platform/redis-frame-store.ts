import type { Redis } from 'ioredis';
import { batchWire, framesOf, Notices, type Frame, type FrameStore, type StoredFrames } from './frame-log.ts';
import { redisCall } from './redis-connection.ts';

export interface RedisFrameStoreOptions {
  /** The instance's Redis connection; its owner closes it. */
  readonly client: Redis;
  /** Prepended to every key and channel. */
  readonly prefix: string;
  readonly onError: (err: unknown) => void;
}

type Entry = [id: string, fields: string[]];

/**
 * Frame logs in Redis: a stream per turn (expiring after the retention) with one entry per write —
 * its id the write's last frame id (`N-0`), field `w` its frames' text, then `e` on the write with the
 * terminal frame — so a fast provider costs a few commands a second (an XADD per frame cost the relay
 * half its rate). A compaction replaces the stream by its snapshot entry. Notices go on a channel per
 * turn, control messages on one channel per deployment, in the same MULTI as the write; they arrive
 * on a second connection of the instance, in subscriber mode (it re-subscribes after a reconnect).
 */
export function createRedisFrameStore(opts: RedisFrameStoreOptions): FrameStore {
  const { client, prefix } = opts;
  const key = (turnId: string): string => `${prefix}fl:${turnId}`;
  const control = `${prefix}ctl`;
  const notices = new Notices(opts.onError);
  const sub = client.duplicate({ enableOfflineQueue: true, lazyConnect: false });
  sub.on('error', opts.onError);
  sub.on('message', (channel: string, message: string) => (channel === control ? notices.control(message) : notices.notice(channel)));
  const ready = sub.subscribe(control).then(() => undefined);
  ready.catch((err: unknown) => opts.onError(err));

  return {
    async write(turnId, batch, ttlMs) {
      const k = key(turnId);
      await redisCall(client, (c) => {
        const m = c.multi();
        if (batch.snapshot) m.del(k).xadd(k, `${batch.snapshot.id}-0`, 'w', batch.snapshot.wire);
        const last = batch.frames.at(-1);
        if (last !== undefined) {
          const wire = batchWire(batch.frames);
          if (batch.end) m.xadd(k, `${last.id}-0`, 'w', wire, 'e', '1');
          else m.xadd(k, `${last.id}-0`, 'w', wire);
        }
        return m.pexpire(k, ttlMs).publish(k, 'f').exec();
      });
    },
    async read(turnId, after): Promise<StoredFrames | undefined> {
      const k = key(turnId);
      // The entries above `after` hold every frame after it (the snapshot's among them when `after` is older).
      const replies = await redisCall(client, (c) => c.multi().exists(k).xrange(k, `${after + 1}-0`, '+').exec());
      const [exists, range] = replies ?? [];
      if (exists?.[1] !== 1) return undefined;
      const frames: Frame[] = [];
      let ended = false;
      for (const [, fields] of (range?.[1] ?? []) as Entry[]) {
        frames.push(...framesOf(fields[1] ?? '', after));
        if (fields[2] === 'e') ended = true;
      }
      return { frames, ended };
    },
    async watch(turnId, wake) {
      const channel = key(turnId);
      const watching = notices.watch(channel, wake);
      if (watching.first) await sub.subscribe(channel);
      return () => {
        if (watching.unwatch()) sub.unsubscribe(channel).catch(() => undefined);
      };
    },
    async alive(turnId) {
      await redisCall(client, (c) => c.publish(key(turnId), 'p'));
    },
    async publish(message) {
      await redisCall(client, (c) => c.publish(control, JSON.stringify(message)));
    },
    onControl: (handler) => notices.onControl(handler),
    ready: () => ready,
    async close() {
      await ready.catch(() => undefined);
      notices.clear();
      sub.disconnect();
    },
  };
}
