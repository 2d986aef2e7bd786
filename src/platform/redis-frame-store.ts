import { batchWire, framesOf, type Frame } from './frames.ts';
import { firstIdOf, Notices, type FrameStore, type StoredFrames, type WriteOutcome } from './frame-store.ts';
import { LuaScript, redisCall, subscriberOf, turnTag, type RedisClient } from './redis-connection.ts';

export interface RedisFrameStoreOptions {
  /** The instance's Redis connection; its owner closes it. */
  readonly client: RedisClient;
  /** Prepended to every key and channel. */
  readonly prefix: string;
  readonly onError: (err: unknown) => void;
}

type Entry = [id: string, fields: string[]];

/**
 * A write, judged and done in one step (frame-log.ts `judgeWrite`, the same rule in Lua): the top of
 * the log is its last entry's id (an entry's id is its last frame's). A batch whose first id the log
 * holds is refused (returns the top); one that does not follow the top without a snapshot is refused
 * as lost (-1); else the snapshot replaces the log, the frames are appended, the expiry set when
 * `setsExpiry` says (frame-store.ts: a log created, replaced or ended) and, when asked, the notice
 * sent (-2). On the common path that is XREVRANGE (the rule's one read) and XADD. KEYS[1] the log;
 * ARGV after, first id, last id, snapshot wire ('' none), batch wire ('' none), '1' when the batch
 * ends the turn, ttl, '1' to send the notice.
 */
const WRITE = new LuaScript(`
local top = 0
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if newest then top = tonumber(string.match(newest[1], '^%d+')) end
if top >= tonumber(ARGV[2]) then return top end
if ARGV[4] == '' and top ~= tonumber(ARGV[1]) then return -1 end
if ARGV[4] ~= '' then
  if top > 0 then redis.call('DEL', KEYS[1]) end
  redis.call('XADD', KEYS[1], ARGV[2] .. '-0', 'w', ARGV[4])
end
if ARGV[5] ~= '' then
  if ARGV[6] == '1' then
    redis.call('XADD', KEYS[1], ARGV[3] .. '-0', 'w', ARGV[5], 'e', '1')
  else
    redis.call('XADD', KEYS[1], ARGV[3] .. '-0', 'w', ARGV[5])
  end
end
if top == 0 or ARGV[4] ~= '' or ARGV[6] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[7]) end
if ARGV[8] == '1' then redis.call('PUBLISH', KEYS[1], 'f') end
return -2
`);

function outcomeOf(reply: unknown): WriteOutcome {
  if (reply === -2) return { kind: 'written' };
  if (reply === -1) return { kind: 'lost' };
  if (typeof reply === 'number' && reply >= 0) return { kind: 'held', top: reply };
  throw new Error(`the frame-log write answered ${String(reply)}`);
}

/**
 * Frame logs in Redis: a stream per turn (expiring after the retention) with one entry per write —
 * its id the write's last frame id (`N-0`), field `w` its frames' text, then `e` on the write with the
 * terminal frame — so a fast provider costs a few commands a second (an XADD per frame cost the relay
 * half its rate). A write is one script that refuses what the log already holds (WRITE). A snapshot
 * replaces the stream by its snapshot entry. Notices go on a channel per turn, sent by the write
 * while someone follows the turn from another instance (else nobody listens); control messages on
 * one channel per deployment; they arrive on a second connection of the instance, in subscriber
 * mode (it re-subscribes after a reconnect). A turn's key (and its channel)
 * carries the turn's hash tag, so on a Redis Cluster the script and the read's MULTI touch one slot;
 * notices are regular PUBLISH, which a cluster delivers to the subscribers of every node.
 */
export function createRedisFrameStore(opts: RedisFrameStoreOptions): FrameStore {
  const { client, prefix } = opts;
  const key = (turnId: string): string => `${prefix}fl:${turnTag(turnId)}`;
  const control = `${prefix}ctl`;
  const notices = new Notices(opts.onError);
  const sub = subscriberOf(client);
  sub.on('error', opts.onError);
  sub.on('message', (channel: string, message: string) => (channel === control ? notices.control(message) : notices.notice(channel)));
  const ready = sub.subscribe(control).then(() => undefined);
  ready.catch((err: unknown) => opts.onError(err));

  return {
    async write(turnId, batch, ttlMs, notify) {
      const last = batch.frames.at(-1);
      const args = [
        batch.after,
        firstIdOf(batch),
        last?.id ?? 0,
        batch.snapshot?.wire ?? '',
        last ? batchWire(batch.frames) : '',
        batch.end ? '1' : '',
        ttlMs,
        notify ? '1' : '',
      ];
      return outcomeOf(await redisCall(client, (c) => WRITE.run(c, [key(turnId)], args)));
    },
    async read(turnId, after): Promise<StoredFrames | undefined> {
      const k = key(turnId);
      // The entries above `after` hold every frame after it (the snapshot's among them when `after` is older).
      const replies = await redisCall(client, (c) =>
        c
          .multi()
          .exists(k)
          .xrange(k, `${after + 1}-0`, '+')
          .exec(),
      );
      const [exists, range] = replies ?? [];
      if (exists?.[1] !== 1) return undefined;
      const frames: Frame[] = [];
      let ended = false;
      for (const [, fields] of (range?.[1] ?? []) as Entry[]) {
        framesOf(fields[1] ?? '', after, frames);
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
    async notify(turnId) {
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
