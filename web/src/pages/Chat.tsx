import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, authorizedFetch, must, type Schemas } from '../api/client.ts';
import { loadCatalogue } from '../catalogue.ts';
import { AuthedImage } from '../components/AuthedImage.tsx';
import { Composer, base64Of, type Outgoing, type Picked } from '../components/Composer.tsx';
import { ConversationHead } from '../components/ConversationHead.tsx';
import { ConversationList } from '../components/ConversationList.tsx';
import { AssistantMessage, EditMessage, UserMessage } from '../components/Messages.tsx';
import { ModelChooser } from '../components/ModelPicker.tsx';
import { navigate } from '../router.ts';
import { EMPTY_REPLY, applyFrame, attach, ended, replyOf, sendMessage, type Frame, type Reply } from '../stream.ts';
import { Problem, useLoad } from '../ui.tsx';
import { refreshWallet, useWallet } from '../wallet.ts';

type Message = Schemas['Message'];
type Conversation = Schemas['ConversationWithMessages'];
type Keys = Schemas['ProviderKeyList'];

/** The title the service gives a conversation from its first message (DESIGN §7): whitespace collapsed, 80 characters. */
const titleOf = (text: string): string => [...text.replace(/\s+/g, ' ').trim()].slice(0, 80).join('');

export function ChatPage({ conversationId }: { conversationId: string | undefined }) {
  const [listRound, setListRound] = useState(0);
  const [listOpen, setListOpen] = useState(false);
  const refreshList = useCallback(() => setListRound((n) => n + 1), []);
  const keys = useLoad(() => must(api.GET('/api/advisor/provider-keys')));
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
      <ConversationList selected={conversationId} round={listRound} open={listOpen} onClose={() => setListOpen(false)} />
      <ConversationView
        key={key}
        conversationId={conversationId}
        keys={keys.data}
        onKeysChanged={keys.reload}
        onChanged={refreshList}
        onAdopt={adopt}
        listOpen={listOpen}
        onToggleList={() => setListOpen((o) => !o)}
      />
    </div>
  );
}

interface Live {
  /** The user message of this turn, as sent (not yet in `conversation`). */
  readonly user: { text: string; previews: string[] } | undefined;
  readonly reply: Reply;
}

interface ViewProps {
  conversationId: string | undefined;
  keys: Keys | undefined;
  onKeysChanged: () => void;
  onChanged: () => void;
  onAdopt: (id: string) => void;
  listOpen: boolean;
  onToggleList: () => void;
}

function ConversationView({ conversationId, keys, onKeysChanged, onChanged, onAdopt, listOpen, onToggleList }: ViewProps) {
  const catalogue = useLoad(loadCatalogue);
  const wallet = useWallet();
  const [conversation, setConversation] = useState<Conversation | undefined>();
  const [older, setOlder] = useState<Message[]>([]);
  const [live, setLive] = useState<Live | undefined>();
  const [problem, setProblem] = useState<unknown>();
  const [pendingTitle, setPendingTitle] = useState<string | undefined>();
  /** Messages a replacing turn takes the place of, hidden while it runs. */
  const [replacing, setReplacing] = useState<readonly string[]>([]);
  const [editing, setEditing] = useState(false);
  const idRef = useRef(conversationId);
  const replyRef = useRef<Reply>(EMPTY_REPLY);
  const pending = useRef<number | undefined>(undefined);
  const detach = useRef<(() => void) | undefined>(undefined);
  const abort = useRef<AbortController | undefined>(undefined);
  const firstFrameSeen = useRef(false);
  const previews = useRef<string[]>([]);
  const log = useRef<HTMLDivElement>(null);
  /** The reader is at the bottom of the thread: new text scrolls into view only then. */
  const following = useRef(true);

  const load = useCallback(async (id: string) => {
    const c = await must(api.GET('/api/advisor/conversations/{id}', { params: { path: { id }, query: { limit: 50 } } }));
    setConversation(c);
    return c;
  }, []);

  // Frames arrive faster than a screen refreshes: they are applied at once and drawn once per frame.
  const take = useCallback(
    (frame: Frame) => {
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
    },
    [onChanged, onAdopt],
  );

  /** A frame drawn after the turn has ended would bring the ended turn back: one still waiting is dropped. */
  const dropPendingDraw = () => {
    if (pending.current !== undefined) cancelAnimationFrame(pending.current);
    pending.current = undefined;
  };

  const finish = useCallback(async () => {
    const id = idRef.current;
    if (id) {
      await load(id).catch(setProblem);
      onChanged();
    }
    dropPendingDraw();
    refreshWallet().catch(() => undefined);
    // The stored message now shows the sent images (fetched from the service): the previews can go.
    for (const url of previews.current) URL.revokeObjectURL(url);
    previews.current = [];
    setReplacing([]);
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

  // New text is followed only while the reader is at the bottom; one who scrolled up stays where they are.
  useLayoutEffect(() => {
    const el = log.current;
    if (el && following.current) el.scrollTop = el.scrollHeight;
  }, [live, conversation, editing]);

  const streaming = live !== undefined && !ended(live.reply);
  const stop = useCallback(async () => {
    const id = idRef.current;
    if (id) await must(api.POST('/api/advisor/conversations/{id}/stop', { params: { path: { id } } })).catch(setProblem);
  }, []);
  // Escape stops a reply, wherever the focus is (an open editor or list takes its own Escape first).
  useEffect(() => {
    if (!streaming) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !e.defaultPrevented) void stop();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [streaming, stop]);

  const send = async (m: Outgoing & { replaces?: readonly string[] }): Promise<boolean> => {
    setProblem(undefined);
    const attachments = await Promise.all(m.images.map(async (i) => ({ type: 'image' as const, format: i.format, dataBase64: await base64Of(i.file) })));
    const [replaces] = m.replaces ?? [];
    const body = {
      text: m.text,
      clientMessageId: crypto.randomUUID(),
      ...(m.personaId ? { personaId: m.personaId } : {}),
      ...(attachments.length ? { attachments } : {}),
      ...(replaces ? { replaces } : {}),
    };
    const id = idRef.current;
    const url = id ? `/api/advisor/conversations/${encodeURIComponent(id)}/messages/stream` : '/api/advisor/conversations/new/messages/stream';
    replyRef.current = EMPTY_REPLY;
    firstFrameSeen.current = false;
    following.current = true;
    performance.clearMarks('reply-first-frame');
    performance.clearMeasures('reply-first-text');
    previews.current = m.images.map((i) => i.preview);
    if (!id) setPendingTitle(titleOf(m.text));
    setReplacing(m.replaces ?? []);
    setEditing(false);
    setLive({ user: { text: m.text, previews: previews.current }, reply: EMPTY_REPLY });
    const controller = new AbortController();
    abort.current = controller;
    try {
      await sendMessage(url, body, take, controller.signal);
    } catch (err) {
      dropPendingDraw();
      setLive(undefined);
      setReplacing([]);
      setPendingTitle(undefined);
      setProblem(err);
      return false;
    }
    if (controller.signal.aborted) return true;
    if (!ended(replyRef.current) && idRef.current) resume(idRef.current);
    else await finish();
    return true;
  };

  const messages = [...older, ...(conversation?.messages ?? [])];
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const lastReply = messages.at(-1)?.role === 'assistant' ? messages.at(-1) : undefined;

  /** The last turn again (regenerate, a retry, an edit): it takes the place of the stored one, with its images. */
  const again = async (text: string): Promise<boolean> => {
    if (!lastUser) return false;
    const images = await Promise.all(lastUser.attachments.map(imageOf)).catch((err: unknown) => (setProblem(err), undefined));
    if (!images) return false;
    const replaced = [lastUser.id, ...(lastReply ? [lastReply.id] : [])];
    return send({ text, personaId: conversation?.personaId ?? undefined, images, replaces: replaced });
  };

  // While a reply streams, its stored row (status streaming) is drawn from the frames instead; a replaced turn is hidden.
  const hidden = new Set([...replacing, ...(live?.reply.assistantMessageId ? [live.reply.assistantMessageId] : [])]);
  const shown = messages.filter((x) => !hidden.has(x.id));
  const idle = !live;
  const title = conversation?.title ?? pendingTitle ?? 'New conversation';

  return (
    <section class="conversation" aria-labelledby="page-title">
      <ConversationHead
        conversation={conversation}
        title={title}
        messages={messages}
        listOpen={listOpen}
        onToggleList={onToggleList}
        onRenamed={(c) => {
          setConversation((prev) => prev && { ...prev, title: c.title });
          onChanged();
        }}
        onDeleted={() => {
          navigate('/chat');
          onChanged();
        }}
        onProblem={setProblem}
      />
      <div
        class="messages"
        ref={log}
        role="log"
        aria-label="Messages"
        tabIndex={0}
        aria-busy={streaming}
        onScroll={(e) => {
          const el = e.currentTarget;
          following.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
        }}
      >
        {conversation?.nextCursor && (
          <button
            type="button"
            class="secondary"
            onClick={() =>
              must(
                api.GET('/api/advisor/conversations/{id}', {
                  params: { path: { id: conversation.id }, query: { limit: 50, cursor: conversation.nextCursor ?? '' } },
                }),
              )
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
        {!idRef.current && !live && <Welcome needsKey={keys !== undefined && keys.items.length === 0} />}
        {shown.map((m) =>
          m.role === 'user' ? (
            editing && idle && m.id === lastUser?.id ? (
              <EditMessage key={m.id} text={m.text} onCancel={() => setEditing(false)} onSend={(text) => void again(text)} />
            ) : (
              <UserMessage
                key={m.id}
                text={m.text}
                actions={
                  idle && m.id === lastUser?.id ? (
                    <button type="button" class="ghost small" onClick={() => setEditing(true)}>
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
              onRetry={idle && m.id === lastReply?.id && m.error?.retryable ? () => void again(lastUser?.text ?? '') : undefined}
              onRegenerate={idle && m.id === lastReply?.id ? () => void again(lastUser?.text ?? '') : undefined}
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
      </div>
      <Problem error={problem}>{problemHelp(problem)}</Problem>
      <Composer
        catalogue={catalogue.data}
        personaId={conversation?.personaId ?? undefined}
        streaming={streaming}
        onSend={send}
        onStop={() => void stop()}
        model={
          <ModelChooser
            conversation={conversation}
            keys={keys}
            catalogue={catalogue.data}
            wallet={wallet}
            onKeysChanged={onKeysChanged}
            onProblem={setProblem}
          />
        }
      />
    </section>
  );
}

/** An attachment's bytes again, to send with a turn that replaces the one it came with. */
async function imageOf(a: Message['attachments'][number]): Promise<Picked> {
  const res = await authorizedFetch(a.url);
  if (!res.ok) throw new Error('an image of the message could not be read again');
  const blob = await res.blob();
  const file = new File([blob], `image.${a.format}`, { type: blob.type });
  return { id: a.id, file, format: a.format, preview: URL.createObjectURL(blob) };
}

function problemHelp(err: unknown) {
  const code = (err as { code?: string } | undefined)?.code;
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

function Welcome({ needsKey }: { needsKey: boolean }) {
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
