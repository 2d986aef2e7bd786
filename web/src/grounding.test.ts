import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Marked } from 'marked';
import { drawFigures, figureMarks, groundingLine, markSource, marksInPart, placeMarks, type DrawFigure, type Grounding } from './grounding.ts';

// The page's Markdown options (markdown.ts); DOMPurify needs a DOM, and leaves this HTML as it is.
const marked = new Marked({ gfm: true, breaks: true, async: false });

/** A figure drawn as ⟦index| … ⟧; `+` on a piece after the first, `L` inside a link of the reply's own. */
const brackets: DrawFigure = ({ index, first, inLink }) => ({ open: `⟦${index}${first ? '' : '+'}${inLink ? 'L' : ''}|`, close: '⟧' });

/** Grounding with the given figures found in `content` (unmatched: no source; a string: a tool call's id; null: the user's message). */
function grounding(content: string, figures: readonly (readonly [text: string, from: string | null | undefined, occurrence?: number])[]): Grounding {
  const unmatched: Grounding['unmatched'][number][] = [];
  const sources: Grounding['sources'][number][] = [];
  for (const [text, from, occurrence = 0] of figures) {
    let start = -1;
    for (let i = 0; i <= occurrence; i++) start = content.indexOf(text, start + 1);
    assert.ok(start >= 0, `${text} is in the content`);
    const f = { text, start, end: start + text.length };
    if (from === undefined) unmatched.push(f);
    else sources.push({ ...f, toolCallId: from });
  }
  return { figures: figures.length, matched: sources.length, unmatched, sources };
}

const rendered = (content: string, g: Grounding): string => {
  const marks = figureMarks(content, g);
  return placeMarks(marked.parse(markSource(content, marks)) as string, brackets);
};

describe('DESIGN §18 on the page: a figure keeps its mark wherever the Markdown puts it', () => {
  const cases: readonly { rule: string; content: string; figures: Parameters<typeof grounding>[1]; html: string }[] = [
    { rule: 'in a sentence', content: 'AAPL is at $232.80 today.', figures: [['$232.80', 'call_1']], html: '<p>AAPL is at ⟦0|$232.80⟧ today.</p>\n' },
    {
      rule: 'in bold, the bold intact',
      content: 'P&L: **$1,234.56** and **(120.50)**',
      figures: [
        ['$1,234.56', 'call_1'],
        ['(120.50)', undefined],
      ],
      html: '<p>P&amp;L: <strong>⟦0|$1,234.56⟧</strong> and <strong>⟦1|(120.50)⟧</strong></p>\n',
    },
    {
      rule: 'beside emphasis that does not open (a letter before `**`, punctuation after): still not emphasis',
      content: 'a**$5**b',
      figures: [['$5', undefined]],
      html: '<p>a**⟦0|$5⟧**b</p>\n',
    },
    {
      rule: 'in a list',
      content: '- Entry 228.40\n- Stop -3.5%',
      figures: [
        ['228.40', 'call_1'],
        ['-3.5%', undefined],
      ],
      html: '<ul>\n<li>Entry ⟦0|228.40⟧</li>\n<li>Stop ⟦1|-3.5%⟧</li>\n</ul>\n',
    },
    {
      rule: 'in a table',
      content: '| Level | Price |\n|---|---|\n| Support | 228.40 |\n| Target | 250 |',
      figures: [
        ['228.40', 'call_1'],
        ['250', undefined],
      ],
      html: '<table>\n<thead>\n<tr>\n<th>Level</th>\n<th>Price</th>\n</tr>\n</thead>\n<tbody><tr>\n<td>Support</td>\n<td>⟦0|228.40⟧</td>\n</tr>\n<tr>\n<td>Target</td>\n<td>⟦1|250⟧</td>\n</tr>\n</tbody></table>\n',
    },
    { rule: 'in a heading', content: '## Target 250', figures: [['250', undefined]], html: '<h2>Target ⟦0|250⟧</h2>\n' },
    { rule: 'in inline code', content: 'Size `120 shares`', figures: [['120', 'call_2']], html: '<p>Size <code>⟦0|120⟧ shares</code></p>\n' },
    {
      rule: 'split by markup: marked piece by piece, the HTML well formed',
      content: '$1,2**34** total',
      figures: [['$1,2**34', undefined]],
      html: '<p>⟦0|$1,2⟧<strong>⟦0+|34⟧</strong> total</p>\n',
    },
    {
      rule: 'with an escaped dollar: the escape still works',
      content: 'Price \\$5 now',
      figures: [['$5', undefined]],
      html: '<p>Price ⟦0|$5⟧ now</p>\n',
    },
    {
      rule: 'right after another figure, with an escaped dollar',
      content: '5\\$6',
      figures: [
        ['5', undefined],
        ['$6', undefined],
      ],
      html: '<p>⟦0|5⟧⟦1|$6⟧</p>\n',
    },
    {
      rule: "in a link's text: marked as inside the link",
      content: '[$5 target](https://example.com/x)',
      figures: [['$5', undefined]],
      html: '<p><a href="https://example.com/x">⟦0L|$5⟧ target</a></p>\n',
    },
    {
      rule: "in a link's address: the address unchanged, the same figure in the text marked",
      content: '[chart](https://example.com/p/232.80) at 232.80',
      figures: [
        ['232.80', undefined, 0],
        ['232.80', 'call_1', 1],
      ],
      html: '<p><a href="https://example.com/p/232.80">chart</a> at ⟦1|232.80⟧</p>\n',
    },
    {
      rule: 'in a bare address (autolinked): the address unchanged',
      content: 'See https://example.com/123 now',
      figures: [['123', undefined]],
      html: '<p>See <a href="https://example.com/123">https://example.com/⟦0L|123⟧</a> now</p>\n',
    },
    {
      rule: 'beside characters HTML escapes',
      content: 'a < $5 & "b"',
      figures: [['$5', null]],
      html: '<p>a &lt; ⟦0|$5⟧ &amp; &quot;b&quot;</p>\n',
    },
    {
      rule: 'across a line break',
      content: 'Up 2%\nto 250',
      figures: [
        ['2%', 'call_1'],
        ['250', 'call_1'],
      ],
      html: '<p>Up ⟦0|2%⟧<br>to ⟦1|250⟧</p>\n',
    },
  ];
  for (const c of cases) {
    it(`a figure ${c.rule}`, () => {
      assert.equal(rendered(c.content, grounding(c.content, c.figures)), c.html);
    });
  }

  it('a reply that writes private-use characters itself: they are neutralised, not read as marks', () => {
    const content = 'x\uE000\uE101 $5 \uE001';
    assert.equal(rendered(content, grounding(content, [['$5', undefined]])), '<p>x\uFFFD\uFFFD ⟦0|$5⟧ \uFFFD</p>\n');
  });

  it('a reply with no marks keeps its source exactly, private-use characters included', () => {
    const content = 'a**$5**b and \uE000';
    assert.equal(markSource(content, []), content);
  });
});

describe('figureMarks: the figures the page can trust to mark', () => {
  const content = 'Buy 100 at $50.25, stop $48.';
  const cases: readonly { rule: string; g: Grounding | null | undefined; marks: readonly [number, number, string][] }[] = [
    { rule: 'a reply stored before the check (no grounding): none', g: undefined, marks: [] },
    { rule: 'a reply without figures: none', g: { figures: 0, matched: 0, unmatched: [], sources: [] }, marks: [] },
    {
      rule: 'unmatched and matched together, sorted by start',
      g: {
        figures: 3,
        matched: 2,
        unmatched: [{ text: '$48', start: 24, end: 27 }],
        sources: [
          { text: '$50.25', start: 11, end: 17, toolCallId: 'call_1' },
          { text: '100', start: 4, end: 7, toolCallId: null },
        ],
      },
      marks: [
        [4, 7, 'message'],
        [11, 17, 'tool:call_1'],
        [24, 27, 'nowhere'],
      ],
    },
    {
      rule: 'offsets that do not hold the figure’s text: left unmarked',
      g: {
        figures: 2,
        matched: 0,
        unmatched: [
          { text: '$50.25', start: 10, end: 16 },
          { text: '$48', start: 24, end: 27 },
        ],
        sources: [],
      },
      marks: [[24, 27, 'nowhere']],
    },
    {
      rule: 'offsets past the end or empty: left unmarked',
      g: {
        figures: 2,
        matched: 0,
        unmatched: [
          { text: '', start: 4, end: 4 },
          { text: '', start: 40, end: 44 },
        ],
        sources: [],
      },
      marks: [],
    },
    {
      rule: 'a figure overlapping an earlier one: left unmarked',
      g: { figures: 2, matched: 1, unmatched: [{ text: '$50', start: 11, end: 14 }], sources: [{ text: '$50.25', start: 11, end: 17, toolCallId: 'call_1' }] },
      marks: [[11, 14, 'nowhere']],
    },
  ];
  for (const c of cases) {
    it(c.rule, () => {
      const marks = figureMarks(content, c.g).map((m) => [m.start, m.end, m.source.kind === 'tool' ? `tool:${m.source.toolCallId}` : m.source.kind]);
      assert.deepEqual(marks, c.marks);
    });
  }

  it('a figure in a text part after a tool call is marked at its offset in that part; one across two parts in both', () => {
    const parts = ['Quote: 232', '.80 and 5%'];
    const content = parts.join('');
    const marks = figureMarks(
      content,
      grounding(content, [
        ['232.80', 'call_1'],
        ['5%', undefined],
      ]),
    );
    assert.deepEqual(
      marksInPart(marks, 0, parts[0]?.length ?? 0).map((m) => [m.index, m.start, m.end]),
      [[0, 7, 10]],
    );
    assert.deepEqual(
      marksInPart(marks, 10, parts[1]?.length ?? 0).map((m) => [m.index, m.start, m.end]),
      [
        [0, 0, 3],
        [1, 8, 10],
      ],
    );
  });
});

describe('groundingLine: the line under a reply', () => {
  const cases: readonly [Grounding | undefined, string | undefined][] = [
    [undefined, undefined],
    [{ figures: 0, matched: 0, unmatched: [], sources: [] }, undefined],
    [{ figures: 1, matched: 1, unmatched: [], sources: [{ text: '5', start: 0, end: 1, toolCallId: 'c' }] }, '1 of 1 figure from your data and quotes'],
    [{ figures: 1, matched: 0, unmatched: [{ text: '5', start: 0, end: 1 }], sources: [] }, '0 of 1 figure from your data and quotes'],
    [
      { figures: 2, matched: 1, unmatched: [{ text: '5', start: 0, end: 1 }], sources: [{ text: '6', start: 2, end: 3, toolCallId: 'c' }] },
      '1 of 2 figures from your data and quotes',
    ],
    [{ figures: 8, matched: 7, unmatched: [], sources: [] }, '7 of 8 figures from your data and quotes'],
  ];
  for (const [g, line] of cases) {
    it(`${g ? `${g.matched} of ${g.figures}` : 'no grounding'} → ${line ?? 'no line'}`, () => assert.equal(groundingLine(g), line));
  }
});

describe('drawFigures: what each figure becomes', () => {
  const content = 'Risk $120 on 100 shares at 232.80, target $250, up 3%.';
  const marks = figureMarks(
    content,
    grounding(content, [
      ['$120', 'call_9'],
      ['100', null],
      ['232.80', 'call_"1'],
      ['$250', undefined],
      ['3%', 'call_1'],
    ]),
  );
  const draw = drawFigures(marks, 'tip-a1', (id) => (id === 'call_9' ? undefined : { id: `tool-a1-${id}`, title: 'Quote' }));
  const cases: readonly [rule: string, index: number, first: boolean, inLink: boolean, open: string, close: string][] = [
    [
      'unmatched: underlined, reachable with Tab, described by the tooltip',
      3,
      true,
      false,
      '<mark class="figure unmatched" tabindex="0" aria-describedby="tip-a1">',
      '</mark>',
    ],
    ['unmatched, a later piece: underlined only', 3, false, false, '<mark class="figure unmatched">', '</mark>'],
    ['unmatched inside a link of the reply: underlined only', 3, true, true, '<mark class="figure unmatched">', '</mark>'],
    [
      'from a tool: a link to its card, the id escaped',
      2,
      true,
      false,
      '<a class="figure sourced" href="#tool-a1-call_&quot;1" title="From the Quote card">',
      '</a>',
    ],
    ['from a tool whose card is not in the reply: marked, no link', 0, true, false, '<span class="figure sourced">', '</span>'],
    ['from a tool, inside a link of the reply: marked, no link', 4, true, true, '<span class="figure sourced">', '</span>'],
    [
      'from the user’s message: marked as such, no link',
      1,
      true,
      false,
      '<span class="figure yours">',
      '<span class="sr-only"> (from your message)</span></span>',
    ],
  ];
  for (const [rule, index, first, inLink, open, close] of cases) {
    it(rule, () => assert.deepEqual(draw({ index, first, inLink }), { open, close }));
  }
});
