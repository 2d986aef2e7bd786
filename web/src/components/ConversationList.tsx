import { useEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { providerName } from '../catalogue.ts';
import { Problem, useCursorPages } from '../ui.tsx';

type Item = Schemas['ConversationListItem'];

const DAY = 86_400_000;
const time = new Intl.DateTimeFormat(undefined, { timeStyle: 'short' });
const date = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });

/** The list's groups, newest first, by the local calendar day a conversation was last active. */
function groupByDate(items: readonly Item[], now = new Date()): { label: string; items: Item[] }[] {
  const today = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const bounds = [
    { label: 'Today', from: today },
    { label: 'Yesterday', from: today - DAY },
    { label: 'Last 7 days', from: today - 7 * DAY },
    { label: 'Older', from: -Infinity },
  ];
  const groups = bounds.map((b) => ({ label: b.label, items: [] as Item[] }));
  for (const item of items) {
    const at = Date.parse(item.updatedAt);
    const i = bounds.findIndex((b) => at >= b.from);
    groups[i]?.items.push(item);
  }
  return groups.filter((g) => g.items.length > 0);
}

/**
 * The trader's conversations: search over their words, grouped by date, one Tab stop per conversation
 * (renaming, exporting and deleting belong to the open conversation's header). On a phone it is a
 * panel the conversation's "Conversations" button opens.
 */
export function ConversationList({ selected, round, open, onClose }: { selected: string | undefined; round: number; open: boolean; onClose: () => void }) {
  const [q, setQ] = useState('');
  const [query, setQuery] = useState('');
  const search = useRef<HTMLInputElement>(null);
  const pages = useCursorPages((cursor) =>
    must(api.GET('/api/advisor/conversations', { params: { query: { limit: 20, ...(cursor ? { cursor } : {}), ...(query ? { q: query } : {}) } } })),
  );
  // The service is asked once the trader pauses, not at every key.
  useEffect(() => {
    const t = setTimeout(() => setQuery(q.trim()), 250);
    return () => clearTimeout(t);
  }, [q]);
  useEffect(() => void pages.reload(), [round, query]);
  useEffect(() => {
    if (open) search.current?.focus();
  }, [open]);
  const groups = groupByDate(pages.items);
  return (
    <nav
      class={`conversations${open ? ' open' : ''}`}
      aria-label="Conversations"
      onKeyDown={(e) => {
        // Escape here is the list's (close the panel), not the reply's (stop it).
        if (e.key === 'Escape' && open) {
          e.preventDefault();
          onClose();
        }
      }}
      onClick={(e) => {
        if ((e.target as Element).closest('a')) onClose();
      }}
    >
      <a class="button new-chat" href="/chat">
        New conversation
      </a>
      <input
        ref={search}
        type="search"
        class="search"
        aria-label="Search conversations"
        placeholder="Search conversations"
        value={q}
        onInput={(e) => setQ(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Escape' && q) {
            e.preventDefault();
            e.stopPropagation();
            setQ('');
          }
        }}
      />
      <Problem error={pages.error} />
      {query && !pages.busy && pages.items.length === 0 && <p class="hint empty">No conversation holds these words.</p>}
      {groups.map((g) => (
        <section key={g.label}>
          <h2>{g.label}</h2>
          <ul>
            {g.items.map((c) => (
              <li key={c.id} class={c.id === selected ? 'selected' : undefined}>
                <a href={`/chat/${c.id}`} aria-current={c.id === selected ? 'page' : undefined}>
                  <span class="title">{c.title}</span>
                  <span class="hint">
                    {providerName(c.provider)} ·{' '}
                    {g.label === 'Today' || g.label === 'Yesterday' ? time.format(new Date(c.updatedAt)) : date.format(new Date(c.updatedAt))}
                  </span>
                </a>
              </li>
            ))}
          </ul>
        </section>
      ))}
      {pages.more && (
        <button type="button" class="secondary" onClick={pages.more} disabled={pages.busy}>
          Older conversations
        </button>
      )}
    </nav>
  );
}
