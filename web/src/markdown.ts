// Model output as Markdown, sanitised: a reply is text from a model (and through it, from whatever the
// model read), so it never becomes HTML that runs. DOMPurify keeps formatting and drops scripts, event
// handlers, javascript: URLs, forms and styles; the page's CSP stops whatever might slip through.
import DOMPurify from 'dompurify';
import { Marked } from 'marked';
import { markSource, placeMarks, type DrawFigure, type FigureMark } from './grounding.ts';

const marked = new Marked({ gfm: true, breaks: true, async: false });

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});

const OPTIONS = {
  USE_PROFILES: { html: true },
  // Images in a reply would be fetched from wherever the model says (a tracker): not shown; the CSP would
  // block them anyway.
  FORBID_TAGS: ['img', 'style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'svg', 'math'],
  FORBID_ATTR: ['style'],
};

/**
 * The text as sanitised HTML; with `figures`, each figure at its offsets drawn by `draw` (DESIGN §18). The
 * figures' elements are the page's own, added after sanitising: nothing of the model's text goes into them
 * but the escaped text DOMPurify left.
 */
export function renderMarkdown(text: string, figures?: { readonly marks: readonly FigureMark[]; readonly draw: DrawFigure }): string {
  if (!figures || figures.marks.length === 0) return DOMPurify.sanitize(marked.parse(text) as string, OPTIONS);
  return placeMarks(DOMPurify.sanitize(marked.parse(markSource(text, figures.marks)) as string, OPTIONS), figures.draw);
}
