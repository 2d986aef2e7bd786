// A reply's figures on the page (DESIGN §18): where each sits in the reply's Markdown source, and how the
// rendered HTML marks it. The offsets are into the raw text, so marker characters go into the source at
// those offsets before it is parsed, and come out of the HTML as elements after it is sanitised: a figure
// keeps its mark inside bold, lists, tables and code, and one split by markup is marked piece by piece.
// No DOM (unit-tested under node).
import type { Schemas } from './api/client.ts';

export type Grounding = Schemas['Grounding'];

/** Where a figure came from: no source, the user's own message, or a tool call's result. */
type FigureSource = { readonly kind: 'nowhere' } | { readonly kind: 'message' } | { readonly kind: 'tool'; readonly toolCallId: string };

export interface FigureMark {
  /** The figure's place among the reply's marks (stable across the reply's text parts). */
  readonly index: number;
  readonly start: number;
  readonly end: number;
  readonly source: FigureSource;
}

/**
 * Marker characters: private-use code points a model has no reason to write (any it does write are
 * neutralised). An opening marker is followed by one more, the mark's index.
 */
const OPEN = '\uE000';
const CLOSE = '\uE001';
/** The same, beside a `PUNCT` (which goes before the opening marker and after the closing one). */
const OPEN_BY_PUNCT = '\uE002';
const CLOSE_BY_PUNCT = '\uE003';
const INDEX_BASE = 0xe100;
const MAX_MARKS = 0xefff - INDEX_BASE + 1;
/**
 * Emphasis in Markdown opens or closes by whether the character beside `*` or `_` is punctuation. A marker
 * beside a figure that starts or ends with punctuation (`$`, `(`, `%`) is preceded or followed by this one,
 * itself punctuation, so `a**$5**b` parses the same with its markers as without.
 */
const PUNCT = '\u2E3A';
const IS_PUNCT = /[\p{P}\p{S}]/u;
const RESERVED = /[\uE000-\uEFFF]/g;

/**
 * The figures to mark in a reply's text `content`, sorted by start: the unmatched and the matched ones of
 * its grounding. One whose offsets do not hold its text in `content` (a reply shown from another source
 * than the one checked) is left unmarked, and so is one overlapping an earlier one.
 */
export function figureMarks(content: string, grounding: Grounding | null | undefined): FigureMark[] {
  if (!grounding) return [];
  const all = [
    ...grounding.unmatched.map((f) => ({ ...f, source: { kind: 'nowhere' } as FigureSource })),
    ...grounding.sources.map((f) => ({
      ...f,
      source: (f.toolCallId === null ? { kind: 'message' } : { kind: 'tool', toolCallId: f.toolCallId }) as FigureSource,
    })),
  ].sort((a, b) => a.start - b.start);
  const marks: FigureMark[] = [];
  let reached = 0;
  for (const f of all) {
    if (!Number.isInteger(f.start) || !Number.isInteger(f.end) || f.start < reached || f.end <= f.start || f.end > content.length) continue;
    if (content.slice(f.start, f.end) !== f.text || marks.length === MAX_MARKS) continue;
    marks.push({ index: marks.length, start: f.start, end: f.end, source: f.source });
    reached = f.end;
  }
  return marks;
}

/**
 * The marks of one text part of a reply, whose text starts at `base` in the reply's content, with offsets
 * into that part. A figure across two parts (text on both sides of a tool call) is marked in each.
 */
export function marksInPart(marks: readonly FigureMark[], base: number, length: number): FigureMark[] {
  return marks
    .filter((m) => m.end > base && m.start < base + length)
    .map((m) => ({ ...m, start: Math.max(m.start, base) - base, end: Math.min(m.end, base + length) - base }));
}

/** The Markdown source with each mark's markers in place. */
export function markSource(text: string, marks: readonly FigureMark[]): string {
  if (marks.length === 0) return text;
  const source = text.replace(RESERVED, '\uFFFD');
  let out = '';
  let at = 0;
  for (const m of marks) {
    let start = m.start;
    // `\$5`: the marker goes before the backslash, which escapes only ASCII punctuation.
    if (start > at && source[start - 1] === '\\' && /[!-/:-@[-`{-~]/.test(source[start] ?? '')) start--;
    const first = source[m.start] ?? '';
    const last = source[m.end - 1] ?? '';
    out += source.slice(at, start);
    out += `${IS_PUNCT.test(first) ? PUNCT + OPEN_BY_PUNCT : OPEN}${String.fromCharCode(INDEX_BASE + m.index)}`;
    out += source.slice(start, m.end);
    out += IS_PUNCT.test(last) ? CLOSE_BY_PUNCT + PUNCT : CLOSE;
    at = m.end;
  }
  return out + source.slice(at);
}

/** How one piece of a figure is drawn: the HTML around it. */
interface FigurePiece {
  readonly index: number;
  /** The figure's first piece (one split by markup has more). */
  readonly first: boolean;
  /** Inside a link of the reply's own: nothing interactive may go there. */
  readonly inLink: boolean;
}
export type DrawFigure = (piece: FigurePiece) => { readonly open: string; readonly close: string };

const MARKER_IN_TEXT = /(?:\u2E3A\uE002|\uE000)([\uE100-\uEFFF])|(\uE003\u2E3A|\uE001)|[\uE000-\uEFFF]/g;
// In a tag, as written or percent-encoded (a link's address): U+E000–U+EFFF are EE 80 80 – EE BF BF in UTF-8.
const MARKER_IN_TAG = /(?:\u2E3A|%E2%B8%BA)(?:\uE002|%EE%80%82)|(?:\uE003|%EE%80%83)(?:\u2E3A|%E2%B8%BA)|[\uE000-\uEFFF]|%EE%[89AB][0-9A-F]%[89AB][0-9A-F]/gi;
const CLOSE_IN_TAG = /\uE001|\uE003|%EE%80%8[13]/i;
const TAG = /<!--[\s\S]*?-->|<\/?[A-Za-z][^>"']*(?:(?:"[^"]*"|'[^']*')[^>"']*)*>/g;

/**
 * Sanitised HTML rendered from `markSource`'s output, with each figure's markers replaced by `draw`'s
 * elements. A figure that markup splits (`$1,2**34**`) is closed before each tag and opened again after
 * it, so the HTML stays well formed; markers that ended up inside a tag (a link's address) are removed.
 */
export function placeMarks(html: string, draw: DrawFigure): string {
  let out = '';
  let open: { index: number; first: boolean; close: string } | undefined;
  let links = 0;
  let at = 0;
  const text = (segment: string) => {
    let from = 0;
    for (const m of segment.matchAll(MARKER_IN_TEXT)) {
      const piece = segment.slice(from, m.index);
      if (piece && open?.close === '') {
        const tags = draw({ index: open.index, first: open.first, inLink: links > 0 });
        open = { ...open, close: tags.close };
        out += tags.open;
      }
      out += piece;
      from = m.index + m[0].length;
      const idx = m[1];
      if (idx !== undefined) {
        if (open) out += open.close;
        open = { index: idx.charCodeAt(0) - INDEX_BASE, first: true, close: '' };
      } else if (m[2] !== undefined && open) {
        out += open.close;
        open = undefined;
      }
    }
    const rest = segment.slice(from);
    if (rest && open?.close === '') {
      const tags = draw({ index: open.index, first: open.first, inLink: links > 0 });
      open = { ...open, close: tags.close };
      out += tags.open;
    }
    out += rest;
  };
  for (const m of html.matchAll(TAG)) {
    text(html.slice(at, m.index));
    // A figure's piece ends before a tag; its next piece starts with the next text.
    if (open && open.close !== '') {
      out += open.close;
      open = { index: open.index, first: false, close: '' };
    }
    const tag = m[0];
    if (/^<a[\s>]/i.test(tag)) links++;
    else if (/^<\/a\s*>/i.test(tag)) links = Math.max(0, links - 1);
    // A figure whose end landed in a tag ends there.
    if (open && CLOSE_IN_TAG.test(tag)) open = undefined;
    out += tag.replace(MARKER_IN_TAG, '');
    at = m.index + tag.length;
  }
  text(html.slice(at));
  if (open && open.close !== '') out += open.close;
  return out;
}

/** The line under a reply: how many of its figures come from the trader's data and quotes; none when it has none. */
export function groundingLine(g: Grounding | null | undefined): string | undefined {
  if (!g || g.figures === 0) return undefined;
  return `${g.matched} of ${g.figures} figure${g.figures === 1 ? '' : 's'} from your data and quotes`;
}

const ATTR_ESCAPES: Record<string, string> = { '&': '&amp;', '"': '&quot;', '<': '&lt;', '>': '&gt;' };
const escapeAttribute = (value: string): string => value.replace(/[&"<>]/g, (c) => ATTR_ESCAPES[c] ?? c);

/** The element id of a tool call's card in a reply (unique on the page: the reply's id is part of it). */
export const toolCardId = (replyKey: string, toolCallId: string): string => `tool-${replyKey}-${toolCallId}`.replace(/[^\w-]/g, '_');

export const NOT_FROM_DATA = 'Not from your data or a quote';

/**
 * How a reply's figures are drawn: an unmatched one underlined, focusable and described by the reply's
 * tooltip (`tipId`); a matched one a link to its tool card (`card` gives the card's id and title, or
 * nothing when the card is not in the reply); one from the user's own message marked as such. Only a
 * figure's first piece outside the reply's own links takes the focus or the link.
 */
export function drawFigures(
  marks: readonly FigureMark[],
  tipId: string,
  card: (toolCallId: string) => { readonly id: string; readonly title: string } | undefined,
): DrawFigure {
  const byIndex = new Map(marks.map((m) => [m.index, m.source]));
  return ({ index, first, inLink }) => {
    const source = byIndex.get(index) ?? { kind: 'nowhere' };
    const active = first && !inLink;
    switch (source.kind) {
      case 'nowhere':
        return active
          ? { open: `<mark class="figure unmatched" tabindex="0" aria-describedby="${escapeAttribute(tipId)}">`, close: '</mark>' }
          : { open: '<mark class="figure unmatched">', close: '</mark>' };
      case 'message':
        return first
          ? { open: '<span class="figure yours">', close: '<span class="sr-only"> (from your message)</span></span>' }
          : { open: '<span class="figure yours">', close: '</span>' };
      case 'tool': {
        const target = card(source.toolCallId);
        if (!active || !target) return { open: '<span class="figure sourced">', close: '</span>' };
        return {
          open: `<a class="figure sourced" href="#${escapeAttribute(target.id)}" title="${escapeAttribute(`From the ${target.title} card`)}">`,
          close: '</a>',
        };
      }
    }
  };
}
