// The catalogue's model patterns (DESIGN §1): a model name with `*` standing for any run of characters,
// anchored at both ends. One rule for the service (findModel, the start statement's LIKE patterns) and
// the web client (what a model costs), so it imports nothing: the web build bundles this file as is.

/** Whether a model name matches a catalogue pattern. */
export function globMatches(pattern: string, value: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === value;
  const first = parts[0] ?? '';
  const last = parts[parts.length - 1] ?? '';
  if (!value.startsWith(first) || !value.endsWith(last) || value.length < first.length + last.length) return false;
  let pos = first.length;
  const end = value.length - last.length;
  for (const middle of parts.slice(1, -1)) {
    const at = value.indexOf(middle, pos);
    if (at < 0 || at + middle.length > end) return false;
    pos = at + middle.length;
  }
  return true;
}

/** Whether a pattern names one model only (no `*`): such a pattern is also a model a trader can pick. */
export const isExactModel = (pattern: string): boolean => !pattern.includes('*');

/** The same pattern as SQL LIKE matches it (with `\` as the escape character): `%` and `_` taken literally, `*` as `%`. */
export const globToLike = (pattern: string): string => pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replaceAll('*', '%');
