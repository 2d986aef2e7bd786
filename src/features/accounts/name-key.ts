/**
 * The form in which account names are compared for uniqueness (DESIGN §9): two names that a reader
 * could not tell apart get the same key. Stored beside the display name (`accounts.name_key`, unique
 * per user; migration 0009 holds a copy of it for its backfill, so changing it needs a migration
 * that recomputes the keys).
 *
 * 1. NFKC: composed and decomposed accents (`Café`), full-width and other compatibility forms
 *    (`Ｍａｉｎ`, `ﬁ`), non-breaking and other spaces.
 * 2. Invisible characters removed: default-ignorable code points (zero-width space, joiners,
 *    soft hyphen, word joiner, variation selectors, BOM …), format characters (bidirectional
 *    controls) and control characters.
 * 3. Case folding, as lower → upper → lower case (`MAIN`, `Main`; `ß`, `ẞ` and `ss` alike).
 * 4. Cyrillic and Greek letters one of whose cases is drawn like a Latin letter are replaced by that
 *    letter (`Mаin` with a Cyrillic а, `ΒΟΝΟ` in Greek capitals) — after folding, so that a name and
 *    its other case still get one key: a documented subset of Unicode's confusables (UTS #39), below.
 * 5. Runs of whitespace (tabs and line breaks included) as one space, trimmed.
 *
 * Not covered: look-alikes within Latin (`rn`/`m`, `l`/`I`/`1`, `O`/`0`), which would make ordinary
 * names collide, and scripts other than Cyrillic and Greek.
 */
export function accountNameKey(name: string): string {
  const visible = name.normalize('NFKC').replace(SPACES, ' ').replace(INVISIBLE, '');
  const folded = visible.toLowerCase().toUpperCase().toLowerCase().normalize('NFKC');
  // Composed again: a mapped base letter may now compose with the accent that follows it.
  const latin = folded.replace(LOOKALIKE, (c) => LATIN_LOOKALIKES[c] ?? c).normalize('NFKC');
  return latin.replace(SPACES, ' ').trim();
}

// Tabs and line breaks are spaces here (before control characters go as invisible); U+FEFF is not.
const SPACES = /\p{White_Space}+/gu;
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/gu;

/**
 * Folded (lower-case) Cyrillic and Greek letters → the Latin letter their capital or small form is
 * drawn like (Cyrillic в: its capital В looks like B; Greek ν: its capital Ν looks like N).
 */
const LATIN_LOOKALIKES: Readonly<Record<string, string>> = {
  // Cyrillic
  а: 'a',
  в: 'b',
  е: 'e',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  ѕ: 's',
  і: 'i',
  ј: 'j',
  ԛ: 'q',
  ԝ: 'w',
  һ: 'h',
  ү: 'y',
  ӏ: 'l',
  // Greek
  α: 'a',
  β: 'b',
  ε: 'e',
  ζ: 'z',
  η: 'h',
  ι: 'i',
  κ: 'k',
  μ: 'm',
  ν: 'n',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'y',
  χ: 'x',
};

const LOOKALIKE = new RegExp(`[${Object.keys(LATIN_LOOKALIKES).join('')}]`, 'gu');
