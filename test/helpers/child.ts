import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** Sends `signal` to a child process a test started (unless it has exited) and waits for its exit. */
export async function endChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}
