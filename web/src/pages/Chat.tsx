import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, explainStreamError, must, type Schemas } from '../api/client.ts';
import { loadCatalogue, providerName } from '../catalogue.ts';
import { AuthedImage } from '../components/AuthedImage.tsx';
import { Composer, base64Of, type Outgoing } from '../components/Composer.tsx';
import { ToolCard } from '../components/ToolCard.tsx';
import { renderMarkdown } from '../markdown.ts';
import { navigate } from '../router.ts';
import { EMPTY_REPLY, applyFrame, attach, ended, replyOf, sendMessage, type Frame, type Reply } from '../stream.ts';
import { Problem, fmtDateTime, fmtNumber, fmtUsd, useAction, useCursorPages, useLoad } from '../ui.tsx';

type Message = Schemas['Message'];
type Conversation = Schemas['ConversationWithMessages'];

export function ChatPage({ conversationId }: { conversationId: string | undefined }) {
  const [listRound, setListRound] = useState(0);
  const refreshList = useCallback(() => setListRound((n) => n + 1), []);
  // A new conversation gets its id from the stream's first frame; the view that started it stays (its
  // reply is still streaming) while the address becomes /chat/{id}. "New conversation" starts a new view.
  const fresh = useRef(0);
  const previous = useRef(conversationId);
  const adopted = useRef<{ id: string; key: string } | undefined>(undefined);
  if (conversationId === undefined && previous.current !== undefined) fresh.current++;
  previous.current = conversationId;
  const key = conversationId === undefined ? `new-${fresh.current}` : adopted.current?.id === conversationId ? adopted.current.key : conversationId;
  const adopt = useCallback((id: string) => {
    adopted.current = { id, key: `new-${fresh.current}` };
    navigate(`/chat/${id}`, { replace: true });
  }, []);
  useEffect(() => {
    document.title = 'Chat · Advisor';
  }, []);
  return (
    <div class="chat">
      <ConversationList selected={conversationId} round={listRound} />
      <ConversationView key={key} conversationId={conversationId} onChanged={refreshList} onAdopt={adopt} />
    </div>
  );
}

function ConversationList({ selected, round }: { selected: string | undefined; round: number }) {
  const pages = useCursorPages((cursor) => must(api.GET('/api/advisor/conversations', { params: { query: { limit: 20, ...(cursor ? { cursor } : {}) } } })));
  const [renaming, setRenaming] = useState<string | undefined>();
  const action = useAction();
  useEffect(() => void pages.reload(), [round]);
  const rename = (id: string, title: string) =>
    action.run(async () => {
      await must(api.PATCH('/api/advisor/conversations/{id}', { params: { path: { id } }, body: { title } }));
      setRenaming(undefined);
      await pages.reload();
    });
  const remove = (c: Schemas['ConversationListItem']) =>
    confirm(`Delete “${c.title}” and its messages?`) &&
    action.run(async () => {
      await must(api.DELETE('/api/advisor/conversations/{id}', { params: { path: { id: c.id } } }));
      if (c.id === selected) navigate('/chat');
      await pages.reload();
    });
  return (
    <nav class="conversations" aria-label="Conversations">
      <a class="button new-chat" href="/chat">
        New conversation
      </a>
      <Problem error={action.error ?? pages.error} />
      <ul>
        {pages.items.map((c) => (
          <li key={c.id} class={c.id === selected ? 'selected' : ''}>
            {renaming === c.id ? (
              <RenameForm title={c.title} onSave={(t) => rename(c.id, t)} onCancel={() => setRenaming(undefined)} />
            ) : (
              <>
                <a href={`/chat/${c.id}`} aria-current={c.id === selected ? 'page' : undefined}>
                  <span class="title">{c.title}</span>
                  <span class="hint">
                    {providerName(c.provider)} · {fmtDateTime(c.lastMessageAt)}
                  </span>
                </a>
                <div class="row-actions">
                  <button type="button" class="icon" onClick={() => setRenaming(c.id)} aria-label={`Rename “${c.title}”`} title="Rename">
                    <Icon d="M4 20h4L19 9l-4-4L4 16v4zM14 6l4 4" />
                  </button>
                  <button type="button" class="icon" onClick={() => remove(c)} aria-label={`Delete “${c.title}”`} title="Delete">
                    <Icon d="M5 7h14M10 7V4h4v3M7 7l1 13h8l1-13" />
                  </button>
                </div>
              </>
            )}
          </li>
        ))}
      </ul>
      {pages.more && (
        <button type="button" class="secondary" onClick={pages.more} disabled={pages.busy}>
          Older conversations
        </button>
      )}
    </nav>
  );
}

function Icon({ d }: { d: string }) {
  return (
    <svg width="16" height="16" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true">
      <path d={d} />
    </svg>
  );
}

function RenameForm({ title, onSave, onCancel }: { title: string; onSave: (t: string) => void; onCancel: () => void }) {
  const [value, setValue] = useState(title);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.select(), []);
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        if (value.trim()) onSave(value.trim());
      }}
    >
      <input ref={input} aria-label="New title" value={value} maxLength={200} onInput={(e) => setValue(e.currentTarget.value)} onKeyDown={(e) => e.key === 'Escape' && onCancel()} />
      <button type="submit" class="secondary">
        Save
      </button>
    </form>
  );
}

interface Live {
  /** Messages of this turn not yet in `conversation` (the user's, shown as sent). */
  readonly user: { text: string; previews: string[] } | undefined;
  readonly reply: Reply;
}

function ConversationView({ conversationId, onChanged, onAdopt }: { conversationId: string | undefined; onChanged: () => void; onAdopt: (id: string) => void }) {
  const catalogue = useLoad(loadCatalogue);
  const [conversation, setConversation] = useState<Conversation | undefined>();
  const [older, setOlder] = useState<Message[]>([]);
  const [live, setLive] = useState<Live | undefined>();
  const [problem, setProblem] = useState<unknown>();
  const idRef = useRef(conversationId);
  const replyRef = useRef<Reply>(EMPTY_REPLY);
  const pending = useRef<number | undefined>(undefined);
  const detach = useRef<(() => void) | undefined>(undefined);
  const abort = useRef<AbortController | undefined>(undefined);
  const firstFrameSeen = useRef(false);
  const previews = useRef<string[]>([]);
  const bottom = useRef<HTMLDivElement>(null);

  const load = useCallback(async (id: string) => {
    const c = await must(api.GET('/api/advisor/conversations/{id}', { params: { path: { id }, query: { limit: 50 } } }));
    setConversation(c);
    return c;
  }, []);

  // Frames arrive faster than a screen refreshes: they are applied at once and drawn once per frame.
  const take = useCallback((frame: Frame) => {
    replyRef.current = applyFrame(replyRef.current, frame);
    if (frame.event === 'delta' && !firstFrameSeen.current) {
      firstFrameSeen.current = true;
      performance.mark('reply-first-frame');
    }
    if (frame.event === 'start') {
      const start = frame.data as Schemas['StreamStartFrame'];
      if (!idRef.current) {
        idRef.current = start.conversationId;
        onAdopt(start.conversationId);
        onChanged();
      }
    }
    if (pending.current === undefined) {
      pending.current = requestAnimationFrame(() => {
        pending.current = undefined;
        setLive((l) => ({ user: l?.user, reply: replyRef.current }));
      });
    }
  }, [onChanged, onAdopt]);

  const finish = useCallback(async () => {
    const id = idRef.current;
    if (id) {
      await load(id).catch(setProblem);
      onChanged();
    }
    // The stored message now shows the sent images (fetched from the service): the previews can go.
    for (const url of previews.current) URL.revokeObjectURL(url);
    previews.current = [];
    setLive(undefined);
  }, [load, onChanged]);

  /** Follows the reply from the last frame taken in, until it ends (a reload or a lost connection lands here). */
  const resume = useCallback(
    (id: string) => {
      detach.current?.();
      setLive((l) => ({ user: l?.user, reply: replyRef.current }));
      detach.current = attach(id, replyRef.current.lastEventId, take, () => {
        detach.current = undefined;
        void finish();
      });
    },
    [take, finish],
  );

  const openedOn = useRef(conversationId);
  useEffect(() => {
    const opened = openedOn.current;
    if (!opened) return;
    load(opened)
      .then((c) => {
        const last = c.messages.at(-1);
        if (last?.role === 'assistant' && last.status === 'streaming') {
          replyRef.current = EMPTY_REPLY;
          resume(c.id);
        }
      })
      .catch(setProblem);
    return () => {
      detach.current?.();
      abort.current?.abort();
      if (pending.current !== undefined) cancelAnimationFrame(pending.current);
    };
  }, [load, resume]);

  // The time from a reply's first frame to its text on screen (docs/PERFORMANCE.md; read by the browser
  // test): the text is in the DOM here, inside the animation frame that paints it; a task queued now runs
  // once that frame is painted.
  useLayoutEffect(() => {
    if (!firstFrameSeen.current || performance.getEntriesByName('reply-first-text').length > 0) return;
    if (!live?.reply.parts.some((p) => p.type === 'text' && p.text)) return;
    setTimeout(() => performance.getEntriesByName('reply-first-text').length === 0 && performance.measure('reply-first-text', 'reply-first-frame'), 0);
  }, [live]);

  useEffect(() => bottom.current?.scrollIntoView({ block: 'end' }), [live, conversation]);

  const send = async (m: Outgoing): Promise<boolean> => {
    setProblem(undefined);
    const attachments = await Promise.all(m.images.map(async (i) => ({ type: 'image' as const, format: i.format, dataBase64: await base64Of(i.file) })));
    const body = { text: m.text, clientMessageId: crypto.randomUUID(), ...(m.personaId ? { personaId: m.personaId } : {}), ...(attachments.length ? { attachments } : {}) };
    const id = idRef.current;
    const url = id ? `/api/advisor/conversations/${encodeURIComponent(id)}/messages/stream` : '/api/advisor/conversations/new/messages/stream';
    replyRef.current = EMPTY_REPLY;
    firstFrameSeen.current = false;
    performance.clearMarks('reply-first-frame');
    performance.clearMeasures('reply-first-text');
    previews.current = m.images.map((i) => i.preview);
    setLive({ user: { text: m.text, previews: previews.current }, reply: EMPTY_REPLY });
    const controller = new AbortController();
    abort.current = controller;
    try {
      await sendMessage(url, body, take, controller.signal);
    } catch (err) {
      setLive(undefined);
      setProblem(err);
      return false;
    }
    if (controller.signal.aborted) return true;
    if (!ended(replyRef.current) && idRef.current) resume(idRef.current);
    else await finish();
    return true;
  };

  /** A reply that failed for a passing reason (the provider busy, a restart): the same question again, as a new turn. */
  const retry = () => {
    const question = [...messages].reverse().find((m) => m.role === 'user');
    if (question) void send({ text: question.text, personaId: conversation?.personaId ?? undefined, images: [] });
  };

  const stop = async () => {
    const id = idRef.current;
    if (id) await must(api.POST('/api/advisor/conversations/{id}/stop', { params: { path: { id } } })).catch(setProblem);
  };

  const streaming = live !== undefined && !ended(live.reply);
  const messages = [...older, ...(conversation?.messages ?? [])];
  // While a reply streams, its stored row (status streaming) is drawn from the frames instead.
  const shown = live && live.reply.assistantMessageId ? messages.filter((x) => x.id !== live.reply.assistantMessageId) : messages;

  return (
    <section class="conversation" aria-labelledby="page-title">
      <header class="conversation-head">
        <h1 id="page-title">{conversation?.title ?? 'New conversation'}</h1>
        {conversation && (
          <span class="hint">
            {providerName(conversation.provider)} · {conversation.model}
          </span>
        )}
      </header>
      <div class="messages" role="log" aria-label="Messages" tabIndex={0} aria-busy={streaming}>
        {conversation?.nextCursor && (
          <button
            type="button"
            class="secondary"
            onClick={() =>
              must(api.GET('/api/advisor/conversations/{id}', { params: { path: { id: conversation.id }, query: { limit: 50, cursor: conversation.nextCursor ?? '' } } }))
                .then((page) => {
                  setOlder((o) => [...page.messages, ...o]);
                  setConversation({ ...conversation, nextCursor: page.nextCursor });
                })
                .catch(setProblem)
            }
          >
            Earlier messages
          </button>
        )}
        {!idRef.current && !live && <Welcome />}
        {shown.map((m, i) =>
          m.role === 'user' ? (
            <UserMessage key={m.id} message={m} />
          ) : (
            <AssistantMessage key={m.id} reply={replyOf(m)} onRetry={!live && i === shown.length - 1 && m.error?.retryable ? retry : undefined} />
          ),
        )}
        {live?.user && (
          <article class="message user" aria-label="You">
            <p class="text">{live.user.text}</p>
            {live.user.previews.map((p) => (
              <img key={p} class="thumb" src={p} alt="attached image" />
            ))}
          </article>
        )}
        {live && <AssistantMessage reply={live.reply} />}
        <div ref={bottom} />
      </div>
      <Problem error={problem}>{problemHelp(problem)}</Problem>
      <Composer catalogue={catalogue.data} personaId={conversation?.personaId ?? undefined} streaming={streaming} onSend={send} onStop={() => void stop()} />
    </section>
  );
}

function problemHelp(err: unknown) {
  const code = (err as { code?: string } | undefined)?.code;
  if (code === 'INSUFFICIENT_CREDITS' || code === 'ALLOWANCE_EXHAUSTED') return <a href="/billing">Buy credits</a>;
  if (code === 'INSUFFICIENT_CREDITS_ALLOWANCE_AVAILABLE' || code === 'MODEL_NOT_AVAILABLE' || code === 'PROVIDER_KEY_NOT_CONFIGURED' || code === 'PROVIDER_KEY_DECRYPTION_FAILED')
    return <a href="/keys">Choose a model on the Keys page</a>;
  return null;
}

function Welcome() {
  return (
    <div class="welcome">
      <h2>Ask your advisor</h2>
      <p>It can look up quotes and price history with your market-data key, read your trading accounts, and look at the charts you attach.</p>
    </div>
  );
}

function UserMessage({ message }: { message: Message }) {
  return (
    <article class="message user" aria-label="You">
      <p class="text">{message.text}</p>
      {message.attachments.map((a) => (
        <AuthedImage key={a.id} url={a.url} alt={`attached ${a.format} image`} />
      ))}
    </article>
  );
}

function AssistantMessage({ reply, onRetry }: { reply: Reply; onRetry?: (() => void) | undefined }) {
  const results = new Map(reply.parts.flatMap((p) => (p.type === 'tool_result' ? [[p.id, p] as const] : [])));
  const running = reply.status === 'streaming';
  return (
    <article class={`message assistant ${reply.status}`} aria-label="Advisor">
      {reply.parts.map((p, i) =>
        p.type === 'text' ? (
          <div key={i} class="md" dangerouslySetInnerHTML={{ __html: renderMarkdown(p.text) }} />
        ) : p.type === 'tool_call' ? (
          <ToolCard key={p.id} call={p} result={results.get(p.id)} running={running} />
        ) : null,
      )}
      {running && reply.parts.length === 0 && <p class="hint typing">Thinking…</p>}
      <ReplyFooter reply={reply} onRetry={onRetry} />
    </article>
  );
}

function ReplyFooter({ reply, onRetry }: { reply: Reply; onRetry?: (() => void) | undefined }) {
  if (reply.status === 'streaming') return null;
  const u = reply.usage;
  const bits: string[] = [];
  if (reply.finishReason === 'stopped') bits.push('Stopped');
  if (reply.finishReason === 'aborted') bits.push('Interrupted');
  if (reply.finishReason === 'length') bits.push('Cut at the length limit');
  if (u && (u.inputTokens !== null || u.outputTokens !== null)) bits.push(`${fmtNumber(u.inputTokens)} in · ${fmtNumber(u.outputTokens)} out tokens`);
  if (u?.estimatedCostUsd !== null && u?.estimatedCostUsd !== undefined) bits.push(`≈ ${fmtUsd(u.estimatedCostUsd)} on your key`);
  if (reply.billing) bits.push(reply.billing.source === 'credits' ? `${reply.billing.credits} credits` : reply.billing.source === 'allowance' ? 'free allowance turn' : 'free');
  return (
    <footer class="reply-footer">
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
