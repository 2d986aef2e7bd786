// Small pieces every page uses: loading data, showing a refusal in words, formatting.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { explain } from './api/client.ts';

export interface Loaded<T> {
  readonly data: T | undefined;
  readonly error: unknown;
  readonly loading: boolean;
  reload(): void;
}

const NARROW = '(max-width: 760px)';

/**
 * A phone-sized window (the stylesheet's breakpoint): what a table folds into its first column there is
 * drawn only then, so a wide window's page holds each figure once.
 */
export function useNarrow(): boolean {
  const [narrow, setNarrow] = useState(() => matchMedia(NARROW).matches);
  useEffect(() => {
    const query = matchMedia(NARROW);
    const changed = () => setNarrow(query.matches);
    query.addEventListener('change', changed);
    return () => query.removeEventListener('change', changed);
  }, []);
  return narrow;
}

/** Loads once (and again on reload() or when a dependency changes). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: undefined, loading: false }),
      (error: unknown) => live && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => void (live = false);
  }, [round, ...deps]);
  return { ...state, reload: useCallback(() => setRound((n) => n + 1), []) };
}

/** Runs an action, keeping its refusal for display; `busy` while it runs. */
export function useAction(): { busy: boolean; error: unknown; run<T>(action: () => Promise<T>): Promise<T | undefined>; clear(): void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = useCallback(async <T,>(action: () => Promise<T>) => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: useCallback(() => setError(undefined), []) };
}

/**
 * A list read page by page with the service's cursors (`nextCursor`): the first page on `reload()`, the
 * next on `more()` (undefined once there is none).
 */
export function useCursorPages<T>(load: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor: string | null }>) {
  const [items, setItems] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loaded, setLoaded] = useState(false);
  const action = useAction();
  const read = (after: string | undefined) =>
    action.run(async () => {
      const page = await load(after);
      setItems((prev) => (after ? [...prev, ...page.items] : page.items));
      setCursor(page.nextCursor);
      setLoaded(true);
    });
  return { items, loaded, busy: action.busy, error: action.error, reload: () => read(undefined), more: cursor ? () => read(cursor) : undefined };
}

export function Problem({ error, children }: { error: unknown; children?: ComponentChildren }) {
  if (error === undefined || error === null) return null;
  return (
    <div class="problem" role="alert">
      <p>{explain(error)}</p>
      {children}
    </div>
  );
}

export function Page({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · Advisor`;
  }, [title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title">{title}</h1>
        {actions}
      </header>
      {children}
    </section>
  );
}

export { fmtDate, fmtDateTime, fmtMoney, fmtNumber, fmtUsd } from './format.ts';

/** A column: its label, numbers aligned right, named for screen readers only, or shown on wide windows only (its cells `wide-only` too). */
type Column = string | { label: string; num?: boolean; srOnly?: boolean; wide?: boolean };

/** A table's header row. */
export function TableHead({ columns }: { columns: Column[] }) {
  return (
    <thead>
      <tr>
        {columns.map((c) => {
          const col = typeof c === 'string' ? { label: c } : c;
          const cls = [col.num ? 'num' : '', col.wide ? 'wide-only' : ''].filter(Boolean).join(' ');
          return (
            <th key={col.label} scope="col" class={cls || undefined}>
              {col.srOnly ? <span class="sr-only">{col.label}</span> : col.label}
            </th>
          );
        })}
      </tr>
    </thead>
  );
}
