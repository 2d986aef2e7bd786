import { useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { PROVIDERS, loadCatalogue, modelEntry, providerName, type Provider } from '../catalogue.ts';
import { Page, Problem, fmtDateTime, useAction, useLoad, TableHead } from '../ui.tsx';

type Key = Schemas['ProviderKeyListItem'];

function KeyState({ k }: { k: { verified: boolean; rejectedAt: string | null; rejectedReason: string | null; lastVerifiedAt: string | null } }) {
  if (k.rejectedAt) return <span class="badge bad" title={k.rejectedReason ?? ''}>Refused {fmtDateTime(k.rejectedAt)}</span>;
  return k.verified ? <span class="badge ok">Verified {fmtDateTime(k.lastVerifiedAt)}</span> : <span class="badge warn">Not verified</span>;
}

export function KeysPage() {
  const keys = useLoad(() => must(api.GET('/api/advisor/provider-keys')));
  const catalogue = useLoad(loadCatalogue);
  const market = useLoad(() => must(api.GET('/api/advisor/market-data-key')));
  const row = useAction();

  const patch = (provider: Provider, body: { active?: boolean; defaultModel?: string }) =>
    row.run(async () => {
      await must(api.PATCH('/api/advisor/provider-keys/{provider}', { params: { path: { provider } }, body }));
      keys.reload();
    });
  const remove = (provider: Provider) =>
    confirm(`Delete your ${providerName(provider)} key?`) &&
    row.run(async () => {
      await must(api.DELETE('/api/advisor/provider-keys/{provider}', { params: { path: { provider } } }));
      keys.reload();
    });

  return (
    <Page title="Keys">
      <p class="hint">Your keys are sent once to this service, which verifies them with the provider and stores them encrypted. This page never keeps them.</p>
      <h2>Language-model keys</h2>
      <Problem error={keys.error ?? row.error} />
      {keys.data && keys.data.items.length === 0 && <p>No key yet. Add one below to talk to the advisor.</p>}
      {keys.data && keys.data.items.length > 0 && (
        <table class="table">
          <caption class="sr-only">Your language-model keys</caption>
          <TableHead columns={['Provider', 'Key', 'Default model', 'State', 'Active', { label: 'Actions', srOnly: true }]} />
          <tbody>
            {keys.data.items.map((k: Key) => {
              const entry = catalogue.data ? modelEntry(catalogue.data, k.provider, k.defaultModel) : undefined;
              return (
                <tr key={k.provider}>
                  <th scope="row">{providerName(k.provider)}</th>
                  <td>
                    <code>…{k.keyHintTail}</code>
                  </td>
                  <td>
                    <ModelEditor k={k} onSave={(defaultModel) => patch(k.provider, { defaultModel })} suggestions={catalogue.data?.providers.find((p) => p.provider === k.provider)?.suggestedModels ?? []} />
                    <div class="hint">{entry ? (entry.allowance ? 'Free allowance turns' : `${entry.creditsPerTurn} credits per turn`) : catalogue.data ? 'Not offered here' : ''}</div>
                  </td>
                  <td>
                    <KeyState k={k} />
                  </td>
                  <td>
                    {k.active ? (
                      <span class="badge ok">Active</span>
                    ) : (
                      <button type="button" class="secondary" disabled={row.busy} onClick={() => patch(k.provider, { active: true })}>
                        Make active<span class="sr-only"> {providerName(k.provider)}</span>
                      </button>
                    )}
                  </td>
                  <td>
                    <button type="button" class="danger" disabled={row.busy} onClick={() => remove(k.provider)}>
                      Delete<span class="sr-only"> {providerName(k.provider)} key</span>
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      <SaveProviderKey suggestions={catalogue.data?.providers ?? []} onSaved={keys.reload} />

      <h2>Market-data key</h2>
      <p class="hint">With it the advisor can look up quotes, price history and market hours for you.</p>
      <Problem error={market.error} />
      {market.data && <MarketDataKey status={market.data} onChange={market.reload} />}
    </Page>
  );
}

function ModelEditor({ k, suggestions, onSave }: { k: Key; suggestions: string[]; onSave: (m: string) => void }) {
  const [model, setModel] = useState(k.defaultModel);
  const id = `models-${k.provider}`;
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        if (model.trim() && model !== k.defaultModel) onSave(model.trim());
      }}
    >
      <input aria-label={`Default model for ${providerName(k.provider)}`} list={id} value={model} onInput={(e) => setModel(e.currentTarget.value)} />
      <datalist id={id}>
        {suggestions.map((m) => (
          <option key={m} value={m} />
        ))}
      </datalist>
      {model !== k.defaultModel && (
        <button type="submit" class="secondary">
          Save
        </button>
      )}
    </form>
  );
}

function SaveProviderKey({ suggestions, onSaved }: { suggestions: { provider: string; suggestedModels: string[] }[]; onSaved: () => void }) {
  const [provider, setProvider] = useState<Provider>('openai');
  const [apiKey, setApiKey] = useState('');
  const [model, setModel] = useState('');
  const [saved, setSaved] = useState<string | undefined>();
  const action = useAction();
  const models = suggestions.find((s) => s.provider === provider)?.suggestedModels ?? [];
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaved(undefined);
    const result = await action.run(() =>
      must(api.PUT('/api/advisor/provider-keys/{provider}', { params: { path: { provider } }, body: { apiKey, ...(model.trim() ? { defaultModel: model.trim() } : {}) } })),
    );
    // The key leaves the page either way once the service has answered.
    setApiKey('');
    if (result) {
      setSaved(`${providerName(provider)} key …${result.keyHintTail} verified and saved${result.active ? ' (active)' : ''}.`);
      onSaved();
    }
  };
  return (
    <form class="card" onSubmit={submit} autoComplete="off">
      <h3>Add or replace a key</h3>
      <div class="row">
        <label>
          Provider
          <select value={provider} onChange={(e) => setProvider(e.currentTarget.value as Provider)}>
            {PROVIDERS.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <label class="grow">
          API key
          <input type="password" name="apiKey" required value={apiKey} autoComplete="off" spellcheck={false} onInput={(e) => setApiKey(e.currentTarget.value)} />
        </label>
        <label>
          Default model (optional)
          <input list="new-key-models" value={model} placeholder={models[0] ?? ''} onInput={(e) => setModel(e.currentTarget.value)} />
          <datalist id="new-key-models">
            {models.map((m) => (
              <option key={m} value={m} />
            ))}
          </datalist>
        </label>
      </div>
      <button type="submit" disabled={action.busy}>
        {action.busy ? 'Verifying…' : 'Verify and save'}
      </button>
      <Problem error={action.error} />
      {saved && (
        <p class="success" role="status">
          {saved}
        </p>
      )}
    </form>
  );
}

function MarketDataKey({ status, onChange }: { status: Schemas['MarketDataKeyStatus']; onChange: () => void }) {
  const [apiKey, setApiKey] = useState('');
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const ok = await action.run(() => must(api.PUT('/api/advisor/market-data-key', { body: { apiKey } })));
    setApiKey('');
    if (ok) onChange();
  };
  const remove = () =>
    confirm('Delete your market-data key?') &&
    action.run(async () => {
      await must(api.DELETE('/api/advisor/market-data-key'));
      onChange();
    });
  return (
    <div class="card">
      {status.configured ? (
        <p>
          {status.provider === 'fmp' ? 'Financial Modeling Prep' : 'Polygon'} key <code>…{status.keyHintTail}</code> <KeyState k={status} />{' '}
          <button type="button" class="danger" onClick={remove} disabled={action.busy}>
            Delete market-data key
          </button>
        </p>
      ) : (
        <p>No market-data key: the advisor can still read your accounts, not the market.</p>
      )}
      <form onSubmit={submit} autoComplete="off">
        <label>
          {status.configured ? 'Replace the key' : 'Market-data API key'}
          <input type="password" name="marketDataKey" required value={apiKey} autoComplete="off" spellcheck={false} onInput={(e) => setApiKey(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={action.busy}>
          {action.busy ? 'Verifying…' : 'Verify and save'}
        </button>
      </form>
      <Problem error={action.error} />
    </div>
  );
}
