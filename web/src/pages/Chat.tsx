import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, authorizedFetch, must, type Schemas } from '../api/client.ts';
import { loadCatalogue } from '../api/catalogue.ts';
import { Composer, base64Of, type Outgoing as ComposerOutgoing, type Picked } from '../components/Composer.tsx';
import { ConversationHead } from '../components/ConversationHead.tsx';
import { ConversationList } from '../components/ConversationList.tsx';
import { ModelChooser } from '../components/ModelPicker.tsx';
import { ProblemHelp, Thread, Welcome, useFollow } from '../components/Thread.tsx';
import { navigate } from '../router.ts';
import { Problem, useLoad } from '../ui.tsx';
import { useTurn } from '../use-turn.ts';
import { useWallet } from '../wallet.ts';

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
  const [problem, setProblem] = useState<unknown>();
  const [pendingTitle, setPendingTitle] = useState<string | undefined>();
  const [editing, setEditing] = useState(false);

  const load = useCallback(async (id: string) => {
    const c = await must(api.GET('/api/advisor/conversations/{id}', { params: { path: { id }, query: { limit: 50 } } }));
    setConversation(c);
    return c;
  }, []);

  const turn = useTurn(conversationId, {
    onStarted: (id) => {
      onAdopt(id);
      onChanged();
    },
    onEnded: async (id) => {
      if (!id) return;
      await load(id).catch(setProblem);
      onChanged();
    },
    onRefused: (err) => {
      setPendingTitle(undefined);
      setProblem(err);
    },
    onProblem: setProblem,
  });
  const { live, follow } = turn;
  const thread = useFollow([live, conversation, editing]);

  const openedOn = useRef(conversationId);
  useEffect(() => {
    const opened = openedOn.current;
    if (!opened) return;
    load(opened)
      .then((c) => {
        const last = c.messages.at(-1);
        if (last?.role === 'assistant' && last.status === 'streaming') follow(c.id);
      })
      .catch(setProblem);
  }, [load, follow]);

  const send = async (m: ComposerOutgoing & { replaces?: readonly string[] }): Promise<boolean> => {
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
    thread.follow();
    if (!turn.id) setPendingTitle(titleOf(m.text));
    setEditing(false);
    return turn.send({ text: m.text, previews: m.images.map((i) => i.preview), replaces: m.replaces ?? [], body });
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

  const earlier = (c: Conversation) =>
    must(api.GET('/api/advisor/conversations/{id}', { params: { path: { id: c.id }, query: { limit: 50, cursor: c.nextCursor ?? '' } } }))
      .then((page) => {
        setOlder((o) => [...page.messages, ...o]);
        setConversation({ ...c, nextCursor: page.nextCursor });
      })
      .catch(setProblem);

  // While a reply streams, its stored row (status streaming) is drawn from the frames instead; a replaced turn is hidden.
  const hidden = new Set([...(live?.replaces ?? []), ...(live?.reply.assistantMessageId ? [live.reply.assistantMessageId] : [])]);
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
      <div class="messages" ref={thread.log} role="log" aria-label="Messages" tabIndex={0} aria-busy={turn.streaming} onScroll={thread.onScroll}>
        {conversation?.nextCursor && (
          <button type="button" class="secondary" onClick={() => void earlier(conversation)}>
            Earlier messages
          </button>
        )}
        {!turn.id && !live && <Welcome needsKey={keys !== undefined && keys.items.length === 0} />}
        <Thread
          messages={messages.filter((x) => !hidden.has(x.id))}
          live={live}
          lastUserId={lastUser?.id}
          lastUserText={lastUser?.text ?? ''}
          lastReply={lastReply}
          editing={editing}
          onEdit={setEditing}
          onAgain={(text) => void again(text)}
        />
      </div>
      <Problem error={problem}>
        <ProblemHelp error={problem} />
      </Problem>
      <Composer
        catalogue={catalogue.data}
        personaId={conversation?.personaId ?? undefined}
        streaming={turn.streaming}
        onSend={send}
        onStop={() => void turn.stop()}
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
