/**
 * Shutdown coordination: once draining, readiness fails and no new stream starts; live streams get
 * until the drain deadline, then are told to stop (they end with SHUTTING_DOWN and settle).
 */
export class Lifecycle {
  #draining = false;
  readonly #live = new Map<symbol, { stop: () => void; done: Promise<void> }>();

  get draining(): boolean {
    return this.#draining;
  }

  get liveStreams(): number {
    return this.#live.size;
  }

  /** Registers a live stream; call the returned function when it has settled. */
  track(stop: () => void): () => void {
    const id = Symbol('stream');
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    this.#live.set(id, { stop, done });
    return () => {
      this.#live.delete(id);
      settle();
    };
  }

  async drain(deadlineMs: number): Promise<void> {
    this.#draining = true;
    const all = () => Promise.all([...this.#live.values()].map((s) => s.done));
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), deadlineMs)));
    const outcome = await Promise.race([all().then(() => 'drained' as const), deadline]);
    clearTimeout(timer);
    if (outcome === 'deadline') {
      for (const s of this.#live.values()) s.stop();
      await all();
    }
  }
}
