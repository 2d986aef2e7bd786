// The three service instances as slots: a fault kills or stops the process in a slot and starts a
// new one there; the load reaches whichever processes are up. Every end of a process is kept (pid,
// signal, time) for the checker.
import type { Cluster, Instance } from '../cluster/cluster.ts';

export interface Slot {
  readonly index: number;
  instance: Instance;
  /** False while its process is being stopped or started. */
  up: boolean;
}

export interface ProcessEnd {
  readonly pid: number;
  readonly signal: NodeJS.Signals;
  readonly at: number;
}

export class Fleet {
  readonly slots: Slot[];
  readonly ends: ProcessEnd[] = [];
  /** Every process ever started in a slot (pid → slot), for the instance a turn started on. */
  readonly pids = new Map<number, number>();
  /** url → pid of every process ever started (a new process listens on a new port). */
  readonly urls = new Map<string, number>();
  private readonly cluster: Cluster;

  constructor(cluster: Cluster) {
    this.cluster = cluster;
    this.slots = cluster.instances.map((instance, index) => ({ index, instance, up: true }));
    for (const s of this.slots) this.note(s);
  }

  live(): Slot[] {
    return this.slots.filter((s) => s.up && s.instance.child.exitCode === null && s.instance.child.signalCode === null);
  }

  /** Ends the slot's process with `signal` (waiting for its exit) and starts a new one in its place. */
  async replace(slot: Slot, signal: NodeJS.Signals): Promise<void> {
    const old = slot.instance;
    slot.up = false;
    const at = Date.now();
    await old.kill(signal);
    this.ends.push({ pid: pidOf(old), signal, at });
    slot.instance = await this.startWithRetry();
    this.note(slot);
    slot.up = true;
  }

  private note(slot: Slot): void {
    this.pids.set(pidOf(slot.instance), slot.index);
    this.urls.set(slot.instance.url, pidOf(slot.instance));
  }

  /** How the process at `url` ended, if the nemesis ended it: `SIGKILL`, `SIGTERM`. */
  endOf(url: string): NodeJS.Signals | undefined {
    const pid = this.urls.get(url);
    return this.ends.find((e) => e.pid === pid)?.signal;
  }

  /** A start may fail while a fault of the stores is still healing (the migrations' lock, a refused connection): tried again. */
  private async startWithRetry(): Promise<Instance> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.cluster.startInstance();
      } catch (err) {
        if (attempt >= 5) throw err;
        await new Promise((r) => setTimeout(r, 1000 * attempt));
      }
    }
  }

  /** Processes that ended without the nemesis ending them (a crash of the service). */
  unexpectedExits(): { pid: number; code: number | null; signal: string | null; lastWords: string }[] {
    const ended = new Set(this.ends.map((e) => e.pid));
    return this.cluster.instances
      .filter((x) => (x.child.exitCode !== null || x.child.signalCode !== null) && !ended.has(pidOf(x)))
      .map((x) => ({
        pid: pidOf(x),
        code: x.child.exitCode,
        signal: x.child.signalCode,
        lastWords: x
          .output()
          .split('\n')
          .filter((l) => !l.startsWith('{"level"'))
          .join('\n')
          .slice(-2000),
      }));
  }
}

export const pidOf = (x: Instance): number => x.child.pid ?? -1;
