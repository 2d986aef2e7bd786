import { useEffect, useRef, useState } from 'preact/hooks';
import { api, must } from '../api/client.ts';
import { signIn } from '../session.ts';
import { Page, Problem, useAction, useLoad } from '../ui.tsx';

/**
 * DESIGN §2: on the embedded default listening on loopback, sign in as any user id (a token from the local
 * secret); elsewhere the host application hands a token over (`/#access_token=…`, or pasted here).
 */
export function SignInPage({ onDone }: { onDone: () => void }) {
  const local = useLoad(async () => (await api.GET('/api/local-sign-in')).response.ok);
  const [userId, setUserId] = useState('');
  const [token, setToken] = useState('');
  const [tokenProblem, setTokenProblem] = useState(false);
  const action = useAction();
  const userField = useRef<HTMLInputElement>(null);
  const tokenField = useRef<HTMLTextAreaElement>(null);
  // The first field the trader fills is ready to be typed in.
  useEffect(() => {
    if (local.loading) return;
    (local.data === true ? userField.current : tokenField.current)?.focus();
  }, [local.loading, local.data]);

  const submitLocal = async (e: Event) => {
    e.preventDefault();
    const s = await action.run(() => must(api.POST('/api/local-sign-in', { body: { userId } })));
    if (s && signIn(s.token)) onDone();
  };
  const submitToken = (e: Event) => {
    e.preventDefault();
    if (signIn(token)) onDone();
    else setTokenProblem(true);
  };

  // The forms appear once it is known whether local sign-in is offered: its card goes above the token's,
  // and appearing later it would move the token form from under the trader's pointer.
  if (local.loading) return <Page title="Sign in">{null}</Page>;
  return (
    <Page title="Sign in">
      {local.data === true && (
        <form class="card" onSubmit={submitLocal}>
          <h2>Local sign-in</h2>
          <p class="hint">This service runs on your machine with its embedded defaults, so any user id signs in.</p>
          <label>
            User id
            <input
              ref={userField}
              name="userId"
              required
              maxLength={128}
              value={userId}
              onInput={(e) => setUserId(e.currentTarget.value)}
              autoComplete="username"
            />
          </label>
          <button type="submit" disabled={action.busy}>
            Sign in
          </button>
          <Problem error={action.error} />
        </form>
      )}
      <form class="card" onSubmit={submitToken}>
        <h2>Sign in with a token</h2>
        <p class="hint">
          {local.data === true
            ? 'Or paste a bearer token (npm run token -- <userId>).'
            : 'Your trading-journal app signs you in here. You can also paste the bearer token it gave you.'}
        </p>
        <label>
          Bearer token
          <textarea
            ref={tokenField}
            name="token"
            rows={3}
            required
            value={token}
            spellcheck={false}
            onInput={(e) => (setToken(e.currentTarget.value), setTokenProblem(false))}
          />
        </label>
        <button type="submit">Use this token</button>
        {tokenProblem && (
          <div class="problem" role="alert">
            <p>That is not a valid, unexpired token.</p>
          </div>
        )}
      </form>
    </Page>
  );
}
