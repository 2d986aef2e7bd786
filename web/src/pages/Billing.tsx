import { useEffect, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { Page, Problem, fmtDate, fmtDateTime, fmtMoney, fmtNumber, useAction, useCursorPages, useLoad, TableHead } from '../ui.tsx';

type Wallet = Schemas['Wallet'];

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

export function WalletSummary({ wallet }: { wallet: Wallet }) {
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
  const wallet = useLoad(() => must(api.GET('/api/billing/wallet')));
  const packs = useLoad(() => must(api.GET('/api/billing/packs')));
  const checkout = useAction();
  const buy = (packId: string) =>
    checkout.run(async () => {
      const { url } = await must(api.POST('/api/billing/checkout', { body: { packId } }));
      // The return page waits for the credits to rise above this.
      sessionStorage.setItem('advisor.creditsBeforeCheckout', String(wallet.data?.credits ?? 0));
      location.assign(url);
    });
  return (
    <Page title="Credits">
      <Problem error={wallet.error} />
      {wallet.data && <WalletSummary wallet={wallet.data} />}
      <p class="hint">
        Cheap models are paid with free monthly turns; the others take credits per turn (see the Keys page for your model). A turn that produced nothing is not charged.
      </p>
      <h2>Buy credits</h2>
      <Problem error={packs.error ?? checkout.error} />
      <ul class="packs">
        {packs.data?.items.map((p) => (
          <li key={p.packId} class="card">
            <h3>{p.name}</h3>
            <p class="value">{fmtNumber(p.credits)} credits</p>
            <p>{fmtMoney(p.amount, p.currency)}</p>
            <button type="button" onClick={() => void buy(p.packId)} disabled={checkout.busy}>
              Buy<span class="sr-only"> {p.name}</span>
            </button>
          </li>
        ))}
      </ul>
      <Ledger />
    </Page>
  );
}

function Ledger() {
  const ledger = useCursorPages((cursor) => must(api.GET('/api/billing/ledger', { params: { query: { limit: 25, ...(cursor ? { cursor } : {}) } } })));
  useEffect(() => void ledger.reload(), []);
  const kinds: Record<string, string> = { purchase: 'Purchase', turn: 'Advisor turn', 'turn-return': 'Turn returned', refund: 'Refund', grant: 'Grant' };
  return (
    <section aria-labelledby="ledger">
      <h2 id="ledger">Ledger</h2>
      <Problem error={ledger.error} />
      {ledger.items.length === 0 && !ledger.busy && <p>No entries yet.</p>}
      {ledger.items.length > 0 && (
        <table class="table">
          <TableHead columns={['When', 'What', { label: 'Credits', num: true }]} />
          <tbody>
            {ledger.items.map((e) => (
              <tr key={e.id}>
                <td>{fmtDateTime(e.createdAt)}</td>
                <td>{kinds[e.kind] ?? e.kind}</td>
                <td class={`num ${e.amount < 0 ? 'down' : 'up'}`}>
                  {e.amount > 0 ? '+' : ''}
                  {fmtNumber(e.amount)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {ledger.more && (
        <button type="button" class="secondary" onClick={ledger.more} disabled={ledger.busy}>
          Older entries
        </button>
      )}
    </section>
  );
}

/**
 * Where the hosted checkout returns. Credits come with the payment provider's webhook, which may arrive
 * after the trader does: the wallet is read again for up to a minute until the credits show.
 */
export function CheckoutReturnPage({ outcome }: { outcome: 'success' | 'cancel' }) {
  const [wallet, setWallet] = useState<Wallet | undefined>();
  const [settled, setSettled] = useState(false);
  useEffect(() => {
    if (outcome !== 'success') return;
    let live = true;
    void (async () => {
      for (let i = 0; i < 30 && live; i++) {
        const w = await must(api.GET('/api/billing/wallet')).catch(() => undefined);
        if (w && live) {
          setWallet(w);
          const pending = sessionStorage.getItem('advisor.creditsBeforeCheckout');
          if (pending !== null && w.credits > Number(pending)) {
            sessionStorage.removeItem('advisor.creditsBeforeCheckout');
            setSettled(true);
            return;
          }
          if (pending === null) return setSettled(true);
        }
        await new Promise((r) => setTimeout(r, 2000));
      }
    })();
    return () => void (live = false);
  }, [outcome]);
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
  return (
    <Page title="Thank you">
      <p role="status">{settled ? 'Your payment went through and the credits are in your wallet.' : 'Payment received. Your credits appear as soon as the payment provider confirms it…'}</p>
      {wallet && <WalletSummary wallet={wallet} />}
      <a class="button" href="/chat">
        Talk to the advisor
      </a>{' '}
      <a class="button secondary" href="/billing">
        Credits and ledger
      </a>
    </Page>
  );
}
