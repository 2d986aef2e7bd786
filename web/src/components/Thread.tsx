import { useLayoutEffect, useRef } from 'preact/hooks';
import type { Schemas } from '../api/client.ts';
import { replyOf } from '../reply.ts';
import type { LiveTurn } from '../use-turn.ts';
import { AuthedImage } from './AuthedImage.tsx';
import { AssistantMessage, EditMessage, UserMessage } from './Messages.tsx';

type Message = Schemas['Message'];

/**
 * New text is followed only while the reader is at the bottom of the thread; one who scrolled up stays
 * where they are. `follow()` brings them back (a turn sent). The thread scrolls when `changes` change.
 */
export function useFollow(changes: readonly unknown[]) {
  const log = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  useLayoutEffect(() => {
    const el = log.current;
    if (el && following.current) el.scrollTop = el.scrollHeight;
  }, changes);
  return {
    log,
    follow: () => void (following.current = true),
    onScroll: (e: { currentTarget: HTMLDivElement }) => {
      const el = e.currentTarget;
      following.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
    },
  };
}

/**
 * A conversation's messages, the running turn last. Only the last turn can be edited, retried or
 * regenerated, and only while no turn runs.
 */
export function Thread(props: {
  /** Stored messages to show (a running reply's own row and the messages it replaces left out). */
  messages: readonly Message[];
  live: LiveTurn | undefined;
  lastUserId: string | undefined;
  lastReply: Message | undefined;
  editing: boolean;
  onEdit: (editing: boolean) => void;
  /** The last turn again with this text (edit, retry, regenerate). */
  onAgain: (text: string) => void;
  lastUserText: string;
}) {
  const { live, editing, lastUserId, lastReply } = props;
  const idle = !live;
  return (
    <>
      {props.messages.map((m) =>
        m.role === 'user' ? (
          editing && idle && m.id === lastUserId ? (
            <EditMessage key={m.id} text={m.text} onCancel={() => props.onEdit(false)} onSend={props.onAgain} />
          ) : (
            <UserMessage
              key={m.id}
              text={m.text}
              actions={
                idle && m.id === lastUserId ? (
                  <button type="button" class="ghost small" onClick={() => props.onEdit(true)}>
                    Edit
                  </button>
                ) : undefined
              }
            >
              {m.attachments.map((a) => (
                <AuthedImage key={a.id} url={a.url} alt={`attached ${a.format} image`} />
              ))}
            </UserMessage>
          )
        ) : (
          <AssistantMessage
            key={m.id}
            reply={replyOf(m)}
            onRetry={idle && m.id === lastReply?.id && m.error?.retryable ? () => props.onAgain(props.lastUserText) : undefined}
            onRegenerate={idle && m.id === lastReply?.id ? () => props.onAgain(props.lastUserText) : undefined}
          />
        ),
      )}
      {live?.user && (
        <UserMessage text={live.user.text}>
          {live.user.previews.map((p) => (
            <img key={p} class="thumb" src={p} alt="attached image" />
          ))}
        </UserMessage>
      )}
      {live && <AssistantMessage reply={live.reply} />}
    </>
  );
}

export function Welcome({ needsKey }: { needsKey: boolean }) {
  return (
    <section class="welcome" aria-labelledby="welcome-title">
      <h2 id="welcome-title">Ask your advisor</h2>
      {needsKey ? (
        <>
          <p>The advisor runs on your own language-model key: add a language-model key first (OpenAI, Anthropic, Gemini and others).</p>
          <p>
            <a class="button" href="/keys">
              Add a key
            </a>
          </p>
        </>
      ) : (
        <p>It can look up quotes and price history with your market-data key, read your trading accounts, and look at the charts you attach.</p>
      )}
    </section>
  );
}

/** A link to where a refusal can be put right (DESIGN §3's codes), beside the refusal's words. */
export function ProblemHelp({ error }: { error: unknown }) {
  const code = (error as { code?: string } | undefined)?.code;
  if (code === 'INSUFFICIENT_CREDITS' || code === 'ALLOWANCE_EXHAUSTED') return <a href="/billing">Buy credits</a>;
  if (
    code === 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE' ||
    code === 'MODEL_NOT_AVAILABLE' ||
    code === 'PROVIDER_KEY_NOT_CONFIGURED' ||
    code === 'PROVIDER_KEY_DECRYPTION_FAILED'
  )
    return <a href="/keys">Choose a model on the Keys page</a>;
  return null;
}
