import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { navigate, onLinkClick, useLocation } from './router.ts';
import { onSessionChange, session, signOut } from './session.ts';
import { AccountsPage } from './pages/Accounts.tsx';
import { BillingPage, CheckoutReturnPage } from './pages/Billing.tsx';
import { ChatPage } from './pages/Chat.tsx';
import { JournalPage } from './pages/Journal.tsx';
import { KeysPage } from './pages/Keys.tsx';
import { SignInPage } from './pages/SignIn.tsx';
import { UsagePage } from './pages/Usage.tsx';
import './styles.css';

const NAV = [
  { href: '/chat', label: 'Chat' },
  { href: '/keys', label: 'Keys' },
  { href: '/accounts', label: 'Accounts' },
  { href: '/billing', label: 'Credits' },
  { href: '/usage', label: 'Usage' },
];

function App() {
  const { path } = useLocation();
  const [user, setUser] = useState(session());
  useEffect(() => onSessionChange(setUser), []);

  if (!user) {
    return (
      <Shell>
        <SignInPage onDone={() => navigate(path === '/' || path === '/sign-in' ? '/chat' : path, { replace: true })} />
      </Shell>
    );
  }
  if (path === '/' || path === '/sign-in') {
    navigate('/chat', { replace: true });
    return null;
  }
  const chat = /^\/chat(?:\/([^/]+))?$/.exec(path);
  const journal = /^\/accounts\/([^/]+)\/journal$/.exec(path);
  const page = chat ? (
    <ChatPage conversationId={chat[1] ? decodeURIComponent(chat[1]) : undefined} />
  ) : journal?.[1] ? (
    <JournalPage key={journal[1]} accountId={decodeURIComponent(journal[1])} />
  ) : path === '/keys' ? (
    <KeysPage />
  ) : path === '/accounts' ? (
    <AccountsPage />
  ) : path === '/billing' ? (
    <BillingPage />
  ) : path === '/billing/success' ? (
    <CheckoutReturnPage outcome="success" />
  ) : path === '/billing/cancel' ? (
    <CheckoutReturnPage outcome="cancel" />
  ) : path === '/usage' ? (
    <UsagePage />
  ) : (
    <p>Page not found.</p>
  );
  return (
    <Shell
      fill={chat !== null}
      skipTo={chat ? { id: 'message', label: 'Skip to the message box' } : undefined}
      nav={
        <>
          <nav aria-label="Main">
            <ul>
              {NAV.map((n) => (
                <li key={n.href}>
                  <a href={n.href} aria-current={path === n.href || path.startsWith(`${n.href}/`) ? 'page' : undefined}>
                    {n.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <div class="who">
            <span class="user-id" title={`Signed in as ${user.userId}`}>
              {user.userId}
            </span>
            <button type="button" class="secondary small" onClick={signOut}>
              Sign out
            </button>
          </div>
        </>
      }
    >
      {page}
    </Shell>
  );
}

/**
 * The frame of every page. `fill`: the page takes the window's height and scrolls inside itself (the
 * chat, whose box stays on screen); `skipTo`: where "Skip to…" leads (the content, else).
 */
function Shell({
  nav,
  children,
  fill,
  skipTo,
}: {
  nav?: preact.ComponentChildren;
  children: preact.ComponentChildren;
  fill?: boolean;
  skipTo?: { id: string; label: string } | undefined;
}) {
  const target = skipTo ?? { id: 'content', label: 'Skip to content' };
  return (
    <div class={`shell${fill ? ' fill' : ''}`} onClick={onLinkClick}>
      <a
        class="skip"
        href={`#${target.id}`}
        onClick={(e) => {
          // Focus, not a fragment in the address bar (the router owns it).
          const el = document.getElementById(target.id) ?? document.getElementById('content');
          if (el) {
            e.preventDefault();
            el.focus();
          }
        }}
      >
        {target.label}
      </a>
      <header class="top">
        <a class="brand" href="/chat">
          Advisor
        </a>
        {nav}
      </header>
      <main id="content" class="content" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
