// DESIGN §12: a turn's stream as frames — ids and the SSE text the wire carries — and how a store's
// text of them is read back.

/** One frame of a turn's stream: its id and its text as the wire carries it. */
export interface Frame {
  readonly id: number;
  readonly wire: string;
}

/** The SSE text of a frame (`data` is one line: JSON.stringify output is). */
export const wireOf = (id: number, event: string, data: string): string => `id: ${id}\nevent: ${event}\ndata: ${data}\n\n`;

/** The frames of a log (contiguous ids) after `after`: from its snapshot when `after` is older than it. */
export function framesAfter(frames: readonly Frame[], after: number): Frame[] {
  const first = frames[0];
  return first === undefined ? [] : frames.slice(Math.max(0, after + 1 - first.id));
}

/** A batch of frames as one text (how the shared stores keep a write). */
export const batchWire = (frames: readonly Frame[]): string => frames.map((f) => f.wire).join('');

/**
 * Appends to `out` the frames of a batch's text whose ids are above `after` and above every frame
 * already in `out` (each frame ends with a blank line; a data line never holds one): what a store
 * hands out never repeats an id or goes back, whatever its entries overlap.
 */
export function framesOf(wire: string, after: number, out: Frame[] = []): Frame[] {
  let floor = Math.max(after, out.at(-1)?.id ?? 0);
  for (let at = 0; at < wire.length;) {
    const end = wire.indexOf('\n\n', at);
    const stop = end < 0 ? wire.length : end + 2;
    const text = wire.slice(at, stop);
    // Every frame starts `id: <n>\n`.
    const id = Number.parseInt(text.slice(4), 10);
    if (id > floor) {
      out.push({ id, wire: text });
      floor = id;
    }
    at = stop;
  }
  return out;
}
