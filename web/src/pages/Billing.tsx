import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, must, type Schemas } from '../api/client.ts';
import { perCredit } from '../money.ts';
import { useLocation } from '../router.ts';
import { Page, Problem, fmtDate, fmtDateTime, fmtMoney, fmtNumber, useAction, useCursorPages, useLoad, TableHead } from '../ui.tsx';
import { refreshWallet, useWallet, type Wallet } from '../wallet.ts';

type Pack = Schemas['Pack'];

function Quota({ label, q }: { label: string; q: Schemas['Quota'] }) {
  return (
    <div class="stat">
      <span class="label">{label}</span>
      <span class="value">
        {fmtNumber(q.remaining)} <span class="hint">of {fmtNumber(q.limit)} left</span>
      </span>
      <meter min={0} max={Math.max(q.limit, 1)} value={q.remaining} aria-label={`${label} remaining`} />
      <span class="hint">Resets {fmtDate(q.resetsAt)}</span>
    </div>
  );
}

function WalletSummary({ wallet }: { wallet: Wallet }) {
  return (
    <div class="stats">
      <div class="stat">
        <span class="label">Credits</span>
        <span class="value big" data-testid="credits">
          {fmtNumber(wallet.credits)}
        </span>
        <span class="hint">Tier: {wallet.tier}</span>
      </div>
      <Quota label="Free turns this month" q={wallet.allowance} />
      <Quota label="Images this month" q={wallet.images} />
    </div>
  );
}

export function BillingPage() {
  const wallet = useWallet();
  const packs = useLoad(() => must(api.GET('/api/billing/packs')));
  const checkout = useAction();
  useEffect(() => void refreshWallet().catch(() => undefined), []);
  const buy = (packId: string) =>
    checkout.run(async () => {
      const { url } = await must(api.POST('/api/billing/checkout', { body: { packId } }));
      location.assign(url);
    });
  return (
    <Page title="Credits">
      {wallet && <WalletSummary wallet={wallet} />}
      <p class="hint">
        Cheap models are paid with free monthly turns; the others take credits per turn (the model picker beside the message box shows what a turn costs). A
        turn that produced nothing is not charged.
      </p>
      <h2>Buy credits</h2>
      <Problem error={packs.error ?? checkout.error} />
      <ul class="packs">
        {packs.data?.items.map((p) => (
          <li key={p.packId} class="card">
            <h3>{p.name}</h3>
            {/* A pack named by its size ("500 credits") is not told twice. */}
            {!sameAsCredits(p) && <p class="value">{fmtNumber(p.credits)} credits</p>}
            <p class="price">{fmtMoney(p.amount, p.currency)}</p>
            <p class="hint">{perCredit(p.amount, p.credits, p.currency)}</p>
            <button type="button" onClick={() => void buy(p.packId)} disabled={checkout.busy}>
              Buy<span class="sr-only"> {p.name}</span>
            </button>
          </li>
        ))}
      </ul>
      <Ledger packs={packs.data?.items ?? []} />
    </Page>
  );
}

const sameAsCredits = (p: Pack): boolean => p.name.replace(/[\s,.]/g, '').toLowerCase() === `${p.credits}credits`;

const KINDS: Record<string, string> = { purchase: 'Purchase', turn: 'Advisor turn', 'turn-return': 'Turn returned', refund: 'Refund', grant: 'Grant' };

function Ledger({ packs }: { packs: readonly Pack[] }) {
  const ledger = useCursorPages((cursor) => must(api.GET('/api/billing/ledger', { params: { query: { limit: 25, ...(cursor ? { cursor } : {}) } } })));
  useEffect(() => void ledger.reload(), []);
  const what = (e: Schemas['LedgerEntry']): string => {
    const kind = KINDS[e.kind] ?? e.kind;
    if (!e.purchase) return kind;
    const pack = packs.find((p) => p.packId === e.purchase?.packId)?.name ?? e.purchase.packId;
    return `${kind} · ${pack} · ${fmtMoney(e.purchase.amount, e.purchase.currency)}`;
  };
  return (
    <section aria-labelledby="ledger">
      <h2 id="ledger">Ledger</h2>
      <Problem error={ledger.error} />
      {ledger.items.length === 0 && !ledger.busy && <p>No entries yet.</p>}
      {ledger.items.length > 0 && (
        <div class="table-wrap">
          <table class="table">
            <TableHead columns={['When', 'What', { label: 'Credits', num: true }]} />
            <tbody>
              {ledger.items.map((e) => (
                <tr key={e.id}>
                  <td>{fmtDateTime(e.createdAt)}</td>
                  <td>{what(e)}</td>
                  <td class={`num ${e.amount < 0 ? 'down' : 'up'}`}>
                    {e.amount > 0 ? '+' : ''}
                    {fmtNumber(e.amount)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {ledger.more && (
        <button type="button" class="secondary" onClick={ledger.more} disabled={ledger.busy}>
          Older entries
        </button>
      )}
    </section>
  );
}

type CheckoutState = Schemas['CheckoutState'];
const RETURN_TITLES: Record<CheckoutState['state'], string> = {
  pending: 'Your checkout',
  credited: 'Thank you',
  expired: 'Checkout expired',
  failed: 'Payment failed',
};
/** How long the return page asks again while the payment is not confirmed: the webhook may come after the trader. */
const POLL_MS = 2000;
const POLL_FOR_MS = 10 * 60_000;

/**
 * Where the hosted checkout returns. It shows what the service knows of this checkout (GET
 * /api/billing/checkout/{id}), never what the address claims: pending until the payment webhook has
 * credited it (asked again every 2 s), credited, expired, or failed (a delayed payment that did not pay).
 */
export function CheckoutReturnPage({ outcome }: { outcome: 'success' | 'cancel' }) {
  const { query } = useLocation();
  const sessionId = query.get('session_id') ?? '';
  const wallet = useWallet();
  const [state, setState] = useState<CheckoutState | undefined>();
  const [problem, setProblem] = useState<unknown>();
  useEffect(() => {
    if (outcome !== 'success') return;
    if (!sessionId) return setProblem(new ApiError(404, undefined, null));
    let live = true;
    const until = Date.now() + POLL_FOR_MS;
    void (async () => {
      while (live) {
        try {
          const s = await must(api.GET('/api/billing/checkout/{sessionId}', { params: { path: { sessionId } } }));
          if (!live) return;
          setState(s);
          setProblem(undefined);
          if (s.state !== 'pending') {
            if (s.state === 'credited') await refreshWallet().catch(() => undefined);
            return;
          }
        } catch (err) {
          if (!live) return;
          setProblem(err);
          if (err instanceof ApiError && err.status < 500) return;
        }
        if (Date.now() > until) return;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    })();
    return () => void (live = false);
  }, [outcome, sessionId]);
  if (outcome === 'cancel') {
    return (
      <Page title="Checkout cancelled">
        <p>Nothing was charged. You can buy credits whenever you like.</p>
        <a class="button" href="/billing">
          Back to credits
        </a>
      </Page>
    );
  }
  const notFound = problem instanceof ApiError && problem.status === 404;
  return (
    <Page title={state === undefined ? 'Your checkout' : RETURN_TITLES[state.state]}>
      <div role="status" class={`checkout-state ${state?.state ?? ''}`}>
        {notFound ? (
          <p>This checkout is not one of yours, or it was never opened. Nothing was charged by it.</p>
        ) : !state ? (
          <p>Looking up your checkout…</p>
        ) : state.state === 'credited' ? (
          <p>Your payment went through: {fmtNumber(state.credits)} credits are in your wallet.</p>
        ) : state.state === 'expired' ? (
          <p>This checkout expired before it was paid. Nothing was charged; you can buy credits again.</p>
        ) : state.state === 'failed' ? (
          <p>The payment for this checkout failed. No credits were added; you can buy credits again with another payment method.</p>
        ) : (
          <p>
            Waiting for the payment to be confirmed by the payment provider. Your {fmtNumber(state.credits)} credits ({fmtMoney(state.amount, state.currency)})
            appear here as soon as it is; you can leave this page meanwhile.
          </p>
        )}
      </div>
      {problem !== undefined && !notFound && <Problem error={problem} />}
      {wallet && <WalletSummary wallet={wallet} />}
      <p class="buttons">
        <a class="button" href="/chat">
          Talk to the advisor
        </a>
        <a class="button secondary" href="/billing">
          Credits and ledger
        </a>
      </p>
    </Page>
  );
}
