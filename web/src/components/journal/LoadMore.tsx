// "Load more" under a paged table, and how many rows it shows. The button is never disabled while a page
// loads (a disabled button drops the focus to the page): a click meanwhile does nothing. When the last
// page has come and the button goes, the focus moves to the count beside it, not to the page's top.
import { useEffect, useRef, useState } from 'preact/hooks';

export function LoadMore({ shown, noun, more, busy }: { shown: number; noun: readonly [string, string]; more: (() => unknown) | undefined; busy: boolean }) {
  const button = useRef<HTMLButtonElement>(null);
  const count = useRef<HTMLSpanElement>(null);
  const [keepFocus, setKeepFocus] = useState(false);
  useEffect(() => {
    if (!keepFocus || busy) return;
    setKeepFocus(false);
    (button.current ?? count.current)?.focus();
  }, [keepFocus, busy, more]);
  return (
    <div class="jr-more">
      {shown > 0 && (
        <span class="hint" role="status" tabIndex={-1} ref={count}>
          {shown} {shown === 1 ? noun[0] : noun[1]} shown{more ? '' : ' (all of the range)'}
        </span>
      )}
      {more && (
        <button
          ref={button}
          type="button"
          class="secondary"
          aria-disabled={busy ? 'true' : undefined}
          onClick={() => {
            if (busy) return;
            setKeepFocus(document.activeElement === button.current);
            more();
          }}
        >
          {busy ? 'Loading…' : `Load more ${noun[1]}`}
        </button>
      )}
    </div>
  );
}
