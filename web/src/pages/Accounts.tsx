import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { Page, Problem, fmtDate, useAction, useLoad, useNarrow, TableHead } from '../ui.tsx';
import { Money } from '../components/journal/Figures.tsx';

type Account = Schemas['Account'];
type Brokerage = Schemas['Brokerage'];

const CURRENCIES = ['USD', 'EUR', 'GBP', 'JPY', 'CHF', 'CAD', 'AUD', 'NZD', 'HKD', 'SGD', 'SEK', 'NOK', 'DKK', 'PLN', 'INR', 'BRL', 'MXN', 'ZAR'];

export function AccountsPage() {
  const accounts = useLoad(() => must(api.GET('/api/accounts')));
  const brokerages = useLoad(() => must(api.GET('/api/brokerages')));
  const timezones = useLoad(() => must(api.GET('/api/timezones')));
  const zones = useMemo(() => zoneNames(timezones.data), [timezones.data]);
  const [editing, setEditing] = useState<string | undefined>();
  // The Edit button a closed form gives the focus back to.
  const [returnTo, setReturnTo] = useState<string | undefined>();
  const table = useRef<HTMLTableElement>(null);
  useEffect(() => {
    if (returnTo === undefined || editing !== undefined) return;
    table.current?.querySelector<HTMLButtonElement>(`button[data-edit="${CSS.escape(returnTo)}"]`)?.focus();
    setReturnTo(undefined);
  }, [editing, returnTo]);
  const closeEdit = (id: string) => {
    setEditing(undefined);
    setReturnTo(id);
  };
  const row = useAction();
  const narrow = useNarrow();
  const names = brokerageNames(brokerages.data?.items ?? []);

  // The trades go with the account: the question says how many (DESIGN §17, GET …/trades/count).
  const remove = (a: Account) =>
    row.run(async () => {
      const { count } = await must(api.GET('/api/accounts/{id}/trades/count', { params: { path: { id: a.id } } }));
      const trades = count === 0 ? 'It has no trades.' : `Its ${count === 1 ? 'trade' : `${count.toLocaleString()} trades`} will be deleted with it.`;
      if (!confirm(`Delete the account “${a.name}”? ${trades}`)) return;
      await must(api.DELETE('/api/accounts/{id}', { params: { path: { id: a.id } } }));
      accounts.reload();
    });

  // Nothing below the list is drawn until the list and the brokerages are in, so nothing is pushed down
  // when they arrive (the page used to shift by a fifth of the window while loading).
  const settled = (l: { data: unknown; error: unknown }) => l.data !== undefined || l.error !== undefined;
  const ready = settled(accounts) && settled(brokerages) && settled(timezones);
  return (
    <Page title="Accounts">
      <Problem error={accounts.error ?? row.error} />
      {!ready && (
        <p class="hint" role="status">
          Loading your accounts…
        </p>
      )}
      {ready && accounts.data && accounts.data.items.length === 0 && <p>No trading accounts yet.</p>}
      {ready && accounts.data && accounts.data.items.length > 0 && (
        <div class="table-wrap">
          <table class="table accounts" ref={table}>
            <caption class="sr-only">Your trading accounts</caption>
            <TableHead
              columns={[
                'Name',
                { label: 'Currency', wide: true },
                { label: 'Time zone', wide: true },
                { label: 'Brokerage', wide: true },
                { label: 'Starting balance', num: true },
                { label: 'Created', wide: true },
                { label: 'Actions', srOnly: true },
              ]}
            />
            <tbody>
              {accounts.data.items.map((a) =>
                editing === a.id ? (
                  <tr key={a.id}>
                    <td colSpan={7}>
                      <AccountForm
                        account={a}
                        zones={zones}
                        brokerages={brokerages.data?.items ?? []}
                        onDone={(changed) => {
                          closeEdit(a.id);
                          if (changed) accounts.reload();
                        }}
                      />
                    </td>
                  </tr>
                ) : (
                  <tr key={a.id}>
                    <th scope="row">
                      {a.name}
                      {narrow && (
                        <span class="narrow-only hint">
                          {[a.currency, a.timezone, a.brokerageId ? names.get(a.brokerageId) : undefined].filter(Boolean).join(' · ')}
                        </span>
                      )}
                    </th>
                    <td class="wide-only">{a.currency}</td>
                    <td class="wide-only">{a.timezone}</td>
                    <td class="wide-only">{a.brokerageId ? (names.get(a.brokerageId) ?? '—') : '—'}</td>
                    <td class="num">
                      <Money value={a.startingBalance} currency={a.currency} />
                    </td>
                    <td class="wide-only">{fmtDate(a.createdAt)}</td>
                    <td>
                      <div class="actions">
                        <a class="button secondary small" href={`/accounts/${a.id}/journal`}>
                          Journal<span class="sr-only"> of {a.name}</span>
                        </a>
                        <button type="button" class="secondary small" data-edit={a.id} onClick={() => setEditing(a.id)}>
                          Edit<span class="sr-only"> {a.name}</span>
                        </button>
                        <button type="button" class="danger small" onClick={() => remove(a)} disabled={row.busy}>
                          Delete<span class="sr-only"> {a.name}</span>
                        </button>
                      </div>
                    </td>
                  </tr>
                ),
              )}
            </tbody>
          </table>
        </div>
      )}
      {ready && (
        <>
          <AccountForm zones={zones} brokerages={brokerages.data?.items ?? []} onDone={accounts.reload} />
          <Brokerages list={brokerages.data?.items ?? []} error={brokerages.error} onChange={() => (brokerages.reload(), accounts.reload())} />
        </>
      )}
    </Page>
  );
}

/**
 * Each brokerage's name as the pages show it: brokerages saved with the same name (before names had to
 * differ) are told apart by the day they were added.
 */
function brokerageNames(list: readonly Brokerage[]): Map<string, string> {
  const count = new Map<string, number>();
  for (const b of list) count.set(b.name.toLowerCase(), (count.get(b.name.toLowerCase()) ?? 0) + 1);
  return new Map(list.map((b) => [b.id, (count.get(b.name.toLowerCase()) ?? 0) > 1 ? `${b.name} (added ${fmtDate(b.createdAt)})` : b.name]));
}

/** The zones an account may use, and every name the service accepts (case-insensitive) with the zone it stores. */
interface ZoneNames {
  readonly list: readonly string[];
  readonly canonical: ReadonlyMap<string, string>;
}

function zoneNames(data: { timezones: string[]; links: Record<string, string> } | undefined): ZoneNames {
  const canonical = new Map<string, string>();
  for (const z of data?.timezones ?? []) canonical.set(z.toLowerCase(), z);
  for (const [link, z] of Object.entries(data?.links ?? {})) canonical.set(link.toLowerCase(), z);
  return { list: data?.timezones ?? [], canonical };
}

/** The browser's own zone, as the service stores it (else UTC). */
function browserZone(zones: ZoneNames): string {
  return zones.canonical.get(Intl.DateTimeFormat().resolvedOptions().timeZone.toLowerCase()) ?? zones.canonical.get('etc/utc') ?? zones.list[0] ?? 'Etc/UTC';
}

/**
 * A new account, or an account's edit in its row. `onDone(changed)` closes an edit: saved, cancelled, or
 * Escape anywhere in the form (the page gives the focus back to the row's Edit); an edit opens on its name.
 */
function AccountForm({
  account,
  zones,
  brokerages,
  onDone,
}: {
  account?: Account;
  zones: ZoneNames;
  brokerages: Brokerage[];
  onDone: (changed: boolean) => void;
}) {
  const [name, setName] = useState(account?.name ?? '');
  const [currency, setCurrency] = useState(account?.currency ?? 'USD');
  const [timezone, setTimezone] = useState(account?.timezone ?? '');
  const [balance, setBalance] = useState('');
  const [brokerageId, setBrokerageId] = useState(account?.brokerageId ?? '');
  const action = useAction();
  const typed = timezone || browserZone(zones);
  // A link name (Asia/Calcutta, US/Eastern) is taken and sent as the zone it is stored as.
  const stored = zones.canonical.get(typed.trim().toLowerCase());
  const zone = stored ?? typed;
  const zoneKnown = zones.list.length === 0 || stored !== undefined;
  const listId = `zones-${account?.id ?? 'new'}`;
  const options = useMemo(() => zones.list.map((z) => <option key={z} value={z} />), [zones]);
  const nameInput = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (account) nameInput.current?.focus();
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    const done = await action.run(async () => {
      if (account) {
        const body = {
          ...(name !== account.name ? { name } : {}),
          ...(currency !== account.currency ? { currency } : {}),
          ...(zone !== account.timezone ? { timezone: zone } : {}),
          ...((brokerageId || null) !== account.brokerageId ? { brokerageId: brokerageId || null } : {}),
        };
        if (Object.keys(body).length > 0) await must(api.PUT('/api/accounts/{id}', { params: { path: { id: account.id } }, body }));
      } else {
        await must(
          api.POST('/api/accounts', { body: { name, currency, timezone: zone, startingBalance: balance || '0', ...(brokerageId ? { brokerageId } : {}) } }),
        );
        // The next account starts from the defaults, not from this one.
        setName('');
        setCurrency('USD');
        setTimezone('');
        setBalance('');
        setBrokerageId('');
      }
      return true;
    });
    if (done) onDone(true);
  };

  return (
    <form
      class="card"
      onSubmit={submit}
      aria-label={account ? `Edit ${account.name}` : 'New account'}
      onKeyDown={(e) => {
        // A datalist's open suggestions take the first Escape (the browser's own); the form takes the next.
        if (account && e.key === 'Escape' && !e.defaultPrevented) {
          e.preventDefault();
          onDone(false);
        }
      }}
    >
      {!account && <h2>New account</h2>}
      <div class="row">
        <label class="grow">
          Name
          <input ref={nameInput} required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Currency
          <input
            list="currencies"
            required
            pattern="[A-Za-z]{3}"
            maxLength={3}
            size={5}
            value={currency}
            onInput={(e) => setCurrency(e.currentTarget.value.toUpperCase())}
          />
          <datalist id="currencies">
            {CURRENCIES.map((c) => (
              <option key={c} value={c} />
            ))}
          </datalist>
        </label>
        <label class="grow">
          Time zone
          <input
            list={listId}
            required
            value={typed}
            onInput={(e) => setTimezone(e.currentTarget.value)}
            aria-invalid={!zoneKnown}
            aria-describedby={`${listId}-hint`}
          />
          <datalist id={listId}>{options}</datalist>
          <span id={`${listId}-hint`} class="hint">
            {!zoneKnown ? 'Pick a zone from the list' : stored !== undefined && stored !== typed ? `Stored as ${stored}` : 'IANA name, e.g. America/New_York'}
          </span>
        </label>
        {!account && (
          <label>
            Starting balance
            <input
              inputMode="decimal"
              pattern="[0-9]{1,15}(\.[0-9]{1,8})?"
              placeholder="0"
              value={balance}
              onInput={(e) => setBalance(e.currentTarget.value)}
            />
          </label>
        )}
        <label>
          Brokerage
          <select value={brokerageId} onChange={(e) => setBrokerageId(e.currentTarget.value)}>
            <option value="">None</option>
            {brokerages.map((b) => (
              <option key={b.id} value={b.id}>
                {brokerageNames(brokerages).get(b.id)}
              </option>
            ))}
          </select>
        </label>
      </div>
      <div class="buttons">
        <button type="submit" disabled={action.busy || !zoneKnown}>
          {account ? 'Save changes' : 'Create account'}
        </button>
        {account && (
          <button type="button" class="secondary" onClick={() => onDone(false)}>
            Cancel
          </button>
        )}
      </div>
      <Problem error={action.error} />
    </form>
  );
}

function Brokerages({ list, error, onChange }: { list: Brokerage[]; error: unknown; onChange: () => void }) {
  const [name, setName] = useState('');
  const [taken, setTaken] = useState<string | undefined>();
  const action = useAction();
  const shown = brokerageNames(list);
  return (
    <section class="card" aria-labelledby="brokerages">
      <h2 id="brokerages">Brokerages</h2>
      <Problem error={error ?? action.error} />
      <ul class="plain">
        {list.map((b) => (
          <li key={b.id}>
            {shown.get(b.id)}{' '}
            <button
              type="button"
              class="danger small"
              onClick={() =>
                confirm(`Delete the brokerage “${b.name}”? Its accounts are unlinked.`) &&
                action.run(async () => {
                  await must(api.DELETE('/api/brokerages/{id}', { params: { path: { id: b.id } } }));
                  onChange();
                })
              }
            >
              Delete<span class="sr-only"> brokerage {b.name}</span>
            </button>
          </li>
        ))}
      </ul>
      <form
        class="inline"
        onSubmit={async (e) => {
          e.preventDefault();
          // Two brokerages of one name cannot be told apart in the account form.
          const same = list.find((b) => b.name.trim().toLowerCase() === name.trim().toLowerCase());
          if (same) return setTaken(same.name);
          const ok = await action.run(() => must(api.POST('/api/brokerages', { body: { name: name.trim() } })));
          if (ok) {
            setName('');
            onChange();
          }
        }}
      >
        <label>
          New brokerage
          <input required maxLength={100} value={name} onInput={(e) => (setName(e.currentTarget.value), setTaken(undefined))} />
        </label>
        <button type="submit" disabled={action.busy}>
          Add brokerage
        </button>
      </form>
      {taken && (
        <div class="problem" role="alert">
          <p>You already have a brokerage named {taken}.</p>
        </div>
      )}
    </section>
  );
}
