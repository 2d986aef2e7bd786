/**
 * Waits for an event that only the code under test brings about (a socket it must close, a promise it
 * must settle). The bound is no timing rule: it turns a hang into a failure that names the event, far
 * above anything a busy machine adds and far below any other cause of the event.
 */
export async function settles<T>(event: Promise<T>, what: string, boundMs = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${boundMs} ms`)), boundMs)));
  try {
    return await Promise.race([event, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise the test settles when it decides: what a fake waits on instead of a clock. */
export interface Gate {
  readonly opened: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}
