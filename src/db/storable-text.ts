/**
 * What PostgreSQL stores exactly as sent (DESIGN §10). Text and jsonb refuse `\u0000`, and UTF-8 has
 * no encoding for an unpaired UTF-16 surrogate: the driver would write U+FFFD in its place, so two
 * distinct ids would become one. Such text is refused at the edge, never stored changed.
 */
function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

/**
 * The JSON pointer of the first string (or property name) in `value` that is not storable text, or
 * undefined when every one is.
 */
export function unstorableTextAt(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return isStorableText(value) ? undefined : path || '/';
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableTextAt(value[i], `${path}/${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const here = `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (!isStorableText(key)) return here;
    const found = unstorableTextAt(item, here);
    if (found !== undefined) return found;
  }
  return undefined;
}
