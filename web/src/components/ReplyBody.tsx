import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { drawFigures, figureMarks, marksInPart, NOT_FROM_DATA, toolCardId } from '../grounding.ts';
import { renderMarkdown } from '../markdown.ts';
import type { Reply } from '../reply.ts';
import { ToolCard, toolTitle } from './ToolCard.tsx';

/** The figure the explanation is shown for, and whether the pointer or the focus brought it. */
interface Shown {
  readonly figure: HTMLElement;
  readonly by: 'focus' | 'hover';
}

const UNMATCHED = 'mark.figure.unmatched';

/**
 * A reply's text and tool cards, in order, its figures marked (DESIGN §18): an unmatched one underlined,
 * with "Not from your data or a quote" shown under it on hover and on focus (it is reachable with Tab and
 * described by that text for a screen reader; Escape hides it); a matched one a link to its tool card.
 */
export function ReplyBody({ reply, running }: { reply: Reply; running: boolean }) {
  const key = reply.assistantMessageId ?? 'live';
  const tipId = `figure-tip-${key}`;
  const content = reply.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
  const marks = figureMarks(content, reply.grounding);
  const calls = new Map(reply.parts.flatMap((p) => (p.type === 'tool_call' ? [[p.id, p] as const] : [])));
  const results = new Map(reply.parts.flatMap((p) => (p.type === 'tool_result' ? [[p.id, p] as const] : [])));
  const draw = drawFigures(marks, tipId, (id) => {
    const call = calls.get(id);
    return call && { id: toolCardId(key, id), title: toolTitle(call.name) };
  });
  const tip = useFigureTip();
  let base = 0;
  return (
    <div
      class="reply-body"
      ref={tip.box}
      onFocusIn={tip.onFocusIn}
      onFocusOut={tip.onFocusOut}
      onMouseOver={tip.onMouseOver}
      onMouseOut={tip.onMouseOut}
      onKeyDown={tip.onKeyDown}
    >
      {reply.parts.map((p, i) => {
        if (p.type === 'text') {
          const at = base;
          base += p.text.length;
          const figures = marks.length > 0 ? { marks: marksInPart(marks, at, p.text.length), draw } : undefined;
          return <div key={i} class="md" dangerouslySetInnerHTML={{ __html: renderMarkdown(p.text, figures) }} />;
        }
        return p.type === 'tool_call' ? <ToolCard key={p.id} id={toolCardId(key, p.id)} call={p} result={results.get(p.id)} running={running} /> : null;
      })}
      {marks.some((m) => m.source.kind === 'nowhere') && (
        <div role="tooltip" id={tipId} class="figure-tip" ref={tip.tip} hidden={!tip.shown}>
          {NOT_FROM_DATA}
        </div>
      )}
    </div>
  );
}

/** The explanation's place and visibility: under the figure, kept inside the reply's width. */
function useFigureTip() {
  const box = useRef<HTMLDivElement>(null);
  const tip = useRef<HTMLDivElement>(null);
  const [shown, setShown] = useState<Shown | undefined>();
  useLayoutEffect(() => {
    const el = tip.current;
    const container = box.current;
    if (!el || !container || !shown) return;
    const area = container.getBoundingClientRect();
    const at = shown.figure.getBoundingClientRect();
    el.style.top = `${at.bottom - area.top + 4}px`;
    el.style.left = `${Math.max(0, Math.min(at.left - area.left, area.width - el.offsetWidth))}px`;
  }, [shown]);
  const within = (node: EventTarget | null, el: Element | null | undefined) => node instanceof Node && !!el?.contains(node);
  return {
    box,
    tip,
    shown,
    onFocusIn: (e: FocusEvent) => {
      const figure = (e.target as Element).closest<HTMLElement>(UNMATCHED);
      setShown(figure ? { figure, by: 'focus' } : undefined);
    },
    onFocusOut: (e: FocusEvent) => {
      if (!(e.relatedTarget as Element | null)?.closest?.(UNMATCHED)) setShown((s) => (s?.by === 'focus' ? undefined : s));
    },
    onMouseOver: (e: MouseEvent) => {
      const figure = (e.target as Element).closest<HTMLElement>(UNMATCHED);
      if (figure) setShown((s) => (s?.figure === figure ? s : { figure, by: 'hover' }));
    },
    onMouseOut: (e: MouseEvent) => {
      // The explanation stays while the pointer moves onto it (WCAG 1.4.13).
      setShown((s) => (s?.by === 'hover' && !within(e.relatedTarget, s.figure) && !within(e.relatedTarget, tip.current) ? undefined : s));
    },
    onKeyDown: (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || !shown) return;
      // Escape dismisses the explanation, and nothing else (it stops a running reply otherwise).
      e.preventDefault();
      setShown(undefined);
    },
  };
}
