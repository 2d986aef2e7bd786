// Conversation search (GET /api/advisor/conversations?q=): what a query means. The SQL that answers
// it, and the document it reads, are in repo.ts.

/** Words of a query taken at most; longer words are cut to this many characters. */
const MAX_TERMS = 8;
const MAX_TERM_CHARS = 64;

/**
 * A query as a tsquery for the 'simple' configuration, or undefined when it holds no word: its words
 * (runs of letters and digits, any script, lower case), each a whole word of the conversation, all of
 * them required. Whole words, not prefixes: a prefix is a partial match in the GIN index, which reads
 * every posting of every word it begins (all of the table's "the…" for `the`) before the owner's mark
 * narrows them, where a whole word is intersected with the mark in place (docs/decisions/web-client.md).
 * Only letters, digits and the operator written here reach to_tsquery, so no query can inject tsquery syntax.
 */
export function searchTerms(q: string): string | undefined {
  const words =
    q
      .normalize('NFKC')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? [];
  const terms = [...new Set(words.map((w) => [...w].slice(0, MAX_TERM_CHARS).join('')))].slice(0, MAX_TERMS);
  return terms.length === 0 ? undefined : terms.join(' & ');
}
