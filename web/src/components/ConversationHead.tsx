import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { providerName } from '../catalogue.ts';
import { conversationMarkdown, download, exportFileName } from '../export.ts';
import { useAction } from '../ui.tsx';

type Message = Schemas['Message'];
type Conversation = Schemas['ConversationWithMessages'];

/** The conversation's title and what can be done with it: rename, export, delete; on a phone, the way to the list. */
export function ConversationHead(props: {
  conversation: Conversation | undefined;
  title: string;
  messages: readonly Message[];
  listOpen: boolean;
  onToggleList: () => void;
  onRenamed: (c: Schemas['ConversationListItem']) => void;
  onDeleted: () => void;
  onProblem: (err: unknown) => void;
}) {
  const { conversation } = props;
  const [renaming, setRenaming] = useState(false);
  const renameButton = useRef<HTMLButtonElement>(null);
  const refocus = useRef(false);
  const action = useAction();
  useEffect(() => {
    if (action.error) props.onProblem(action.error);
  }, [action.error]);
  // A closed rename form gives the focus back to Rename, as soon as the button is drawn again.
  useLayoutEffect(() => {
    if (renaming || !refocus.current) return;
    refocus.current = false;
    renameButton.current?.focus();
  }, [renaming]);
  const closeRename = () => {
    refocus.current = true;
    setRenaming(false);
  };
  const rename = (id: string, title: string) =>
    action.run(async () => {
      const c = await must(api.PATCH('/api/advisor/conversations/{id}', { params: { path: { id } }, body: { title } }));
      props.onRenamed(c);
      closeRename();
    });
  const remove = (c: Conversation) =>
    confirm(`Delete “${c.title}” and its messages?`) &&
    action.run(async () => {
      await must(api.DELETE('/api/advisor/conversations/{id}', { params: { path: { id: c.id } } }));
      props.onDeleted();
    });
  const exportIt = (c: Conversation) =>
    action.run(async () => {
      // Every page of its messages, oldest first.
      let all = [...props.messages];
      let cursor = c.nextCursor;
      while (cursor) {
        const page = await must(api.GET('/api/advisor/conversations/{id}', { params: { path: { id: c.id }, query: { limit: 100, cursor } } }));
        all = [...page.messages, ...all];
        cursor = page.nextCursor;
      }
      download(exportFileName(c), conversationMarkdown(c, all));
    });
  return (
    <header class="conversation-head">
      <button type="button" class="secondary small list-toggle" aria-expanded={props.listOpen} onClick={props.onToggleList}>
        Conversations
      </button>
      {renaming && conversation ? (
        <RenameForm title={conversation.title} onSave={(t) => void rename(conversation.id, t)} onCancel={closeRename} busy={action.busy} />
      ) : (
        <h1 id="page-title">{props.title}</h1>
      )}
      {conversation && (
        <p class="hint model">
          {providerName(conversation.provider)} · {conversation.model}
        </p>
      )}
      {conversation && !renaming && (
        <div class="head-actions">
          <button ref={renameButton} type="button" class="ghost small" onClick={() => setRenaming(true)}>
            Rename
          </button>
          <button type="button" class="ghost small" onClick={() => void exportIt(conversation)} disabled={action.busy}>
            Export
          </button>
          <button type="button" class="ghost small danger" onClick={() => remove(conversation)} disabled={action.busy}>
            Delete
          </button>
        </div>
      )}
    </header>
  );
}

function RenameForm({ title, onSave, onCancel, busy }: { title: string; onSave: (t: string) => void; onCancel: () => void; busy: boolean }) {
  const [value, setValue] = useState(title);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.select(), []);
  return (
    <form
      class="rename"
      aria-label="Rename the conversation"
      onSubmit={(e) => {
        e.preventDefault();
        if (value.trim()) onSave(value.trim());
      }}
    >
      <label>
        <span class="sr-only">Title</span>
        <input
          ref={input}
          aria-label="Title"
          value={value}
          maxLength={200}
          onInput={(e) => setValue(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Escape') {
              e.preventDefault();
              onCancel();
            }
          }}
        />
      </label>
      <button type="submit" disabled={busy}>
        Save
      </button>
      <button type="button" class="secondary" onClick={onCancel}>
        Cancel
      </button>
    </form>
  );
}
