// History routing for a handful of pages: the service answers each client path with the same page.
import { useEffect, useState } from 'preact/hooks';

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === location.pathname + location.search) return;
  if (opts.replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((l) => l());
}

export function useLocation(): { path: string; query: URLSearchParams } {
  const [, bump] = useState(0);
  useEffect(() => {
    const l = () => bump((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/** Plain links that route in place (a modified click still opens a new tab). */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.target as Element | null)?.closest?.('a');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = a.getAttribute('href');
  if (!href?.startsWith('/') || a.target === '_blank' || href.startsWith('/api/') || href.startsWith('/docs')) return;
  e.preventDefault();
  navigate(href);
}
