// The bearer token the page calls the API with. Kept in sessionStorage (this tab, survives a reload, gone
// with the tab); never a provider key. A host application hands a token over in the URL fragment
// (`/#access_token=…`, never sent to a server), which is read once and removed from the address bar.

const KEY = 'advisor.session';

export interface Session {
  readonly token: string;
  readonly userId: string;
  /** Epoch ms. */
  readonly expiresAt: number;
}

type Listener = (s: Session | undefined) => void;
const listeners = new Set<Listener>();
let current: Session | undefined = load();

function decode(token: string): Session | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const claims = JSON.parse(atob(payload.replace(/-/g, '+').replace(/_/g, '/'))) as { sub?: unknown; exp?: unknown };
    if (typeof claims.sub !== 'string' || typeof claims.exp !== 'number') return undefined;
    return { token, userId: claims.sub, expiresAt: claims.exp * 1000 };
  } catch {
    return undefined;
  }
}

function load(): Session | undefined {
  const handed = new URLSearchParams(location.hash.slice(1)).get('access_token');
  if (handed) {
    history.replaceState(history.state, '', location.pathname + location.search);
    const s = decode(handed);
    if (s) {
      sessionStorage.setItem(KEY, handed);
      return s;
    }
  }
  const stored = sessionStorage.getItem(KEY);
  const s = stored ? decode(stored) : undefined;
  return s && s.expiresAt > Date.now() ? s : undefined;
}

export function session(): Session | undefined {
  if (current && current.expiresAt <= Date.now()) signOut();
  return current;
}

/** Takes a token (local sign-in or pasted); false when it is not a JWT with `sub` and `exp`. */
export function signIn(token: string): boolean {
  const s = decode(token.trim());
  if (!s || s.expiresAt <= Date.now()) return false;
  sessionStorage.setItem(KEY, s.token);
  current = s;
  for (const l of listeners) l(current);
  return true;
}

export function signOut(): void {
  sessionStorage.removeItem(KEY);
  current = undefined;
  for (const l of listeners) l(undefined);
}

export function onSessionChange(l: Listener): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}
