import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { explainStreamError } from '../api/client.ts';
import { groundingLine } from '../grounding.ts';
import { chargeWords, usageWords } from '../money.ts';
import type { Reply } from '../reply.ts';
import { ReplyBody } from './ReplyBody.tsx';

/** A message's Markdown as the trader would paste it: a reply's text parts, without its tool cards. */
const replyMarkdown = (reply: Reply): string =>
  reply.parts
    .flatMap((p) => (p.type === 'text' ? [p.text] : []))
    .join('\n\n')
    .trim();

/** Copies a message's Markdown; says so for a moment (also to a screen reader). */
function CopyButton({ text }: { text: string }) {
  const [copied, setCopied] = useState<'yes' | 'no' | undefined>();
  useEffect(() => {
    if (!copied) return;
    const t = setTimeout(() => setCopied(undefined), 2000);
    return () => clearTimeout(t);
  }, [copied]);
  return (
    <>
      <button
        type="button"
        class="ghost small"
        onClick={() =>
          navigator.clipboard.writeText(text).then(
            () => setCopied('yes'),
            () => setCopied('no'),
          )
        }
      >
        Copy
      </button>
      <span class="hint copied" role="status">
        {copied === 'yes' ? 'Copied' : copied === 'no' ? 'Could not copy' : ''}
      </span>
    </>
  );
}

export function UserMessage({ text, children, actions }: { text: string; children?: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <article class="message user" aria-label="You">
      <p class="text">{text}</p>
      {children}
      <div class="message-actions">
        <CopyButton text={text} />
        {actions}
      </div>
    </article>
  );
}

/** The last message in place, to send again with other words (Enter sends, Shift+Enter a new line, Escape leaves it). */
export function EditMessage({ text, onSend, onCancel }: { text: string; onSend: (text: string) => void; onCancel: () => void }) {
  const [value, setValue] = useState(text);
  const box = useRef<HTMLTextAreaElement>(null);
  // The focus moves into the editor as it is drawn.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    el.focus();
    el.setSelectionRange(el.value.length, el.value.length);
  }, []);
  const send = () => value.trim() && onSend(value);
  return (
    <form
      class="message user editing"
      aria-label="Edit your last message"
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      <textarea
        ref={box}
        aria-label="Edit your message"
        rows={3}
        value={value}
        onInput={(e) => setValue(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Escape') {
            e.preventDefault();
            e.stopPropagation();
            onCancel();
          } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            send();
          }
        }}
      />
      <div class="buttons">
        <button type="submit" aria-label="Send edited message">
          Send
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function AssistantMessage({
  reply,
  onRetry,
  onRegenerate,
}: {
  reply: Reply;
  onRetry?: (() => void) | undefined;
  onRegenerate?: (() => void) | undefined;
}) {
  const running = reply.status === 'streaming';
  const markdown = replyMarkdown(reply);
  return (
    <article class={`message assistant ${reply.status}`} aria-label="Advisor">
      <ReplyBody reply={reply} running={running} />
      {running && reply.parts.length === 0 && <p class="hint typing">Thinking…</p>}
      {!running && (
        <>
          <ReplyFooter reply={reply} onRetry={onRetry} />
          <div class="message-actions">
            {markdown && <CopyButton text={markdown} />}
            {onRegenerate && (
              <button type="button" class="ghost small" onClick={onRegenerate}>
                Regenerate
              </button>
            )}
          </div>
        </>
      )}
    </article>
  );
}

/** How a reply ended, what it used on the trader's key and what it was charged here. */
function ReplyFooter({ reply, onRetry }: { reply: Reply; onRetry?: (() => void) | undefined }) {
  const bits: string[] = [];
  if (reply.finishReason === 'stopped') bits.push('Stopped');
  if (reply.finishReason === 'aborted') bits.push('Interrupted');
  if (reply.finishReason === 'length') bits.push('Cut at the length limit');
  const used = reply.usage ? usageWords(reply.usage) : '';
  if (used) bits.push(used);
  else if (reply.status === 'interrupted') bits.push('tokens not reported');
  if (reply.billing) bits.push(chargeWords(reply.billing));
  const grounded = groundingLine(reply.grounding);
  return (
    <footer class="reply-footer">
      {grounded && <p class="grounding-line">{grounded}</p>}
      {reply.status === 'failed' && reply.error && (
        <p class="problem" role="alert">
          {explainStreamError(reply.error.code, reply.error.message)} <code>{reply.error.code}</code>{' '}
          {onRetry && (
            <button type="button" class="secondary small" onClick={onRetry}>
              Send again
            </button>
          )}
        </p>
      )}
      {bits.length > 0 && <span class="hint">{bits.join(' · ')}</span>}
    </footer>
  );
}
