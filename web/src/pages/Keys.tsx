import { useEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { loadCatalogue } from '../api/catalogue.ts';
import { PROVIDERS, costWords, marketDataName, providerName, type Catalogue, type Provider } from '../catalogue.ts';
import { Page, Problem, fmtDateTime, useAction, useLoad, useNarrow, TableHead } from '../ui.tsx';

type Key = Schemas['ProviderKeyListItem'];

function KeyState({ k }: { k: { verified: boolean; rejectedAt: string | null; rejectedReason: string | null; lastVerifiedAt: string | null } }) {
  if (k.rejectedAt)
    return (
      <span class="badge bad" title={k.rejectedReason ?? ''}>
        Refused {fmtDateTime(k.rejectedAt)}
      </span>
    );
  return k.verified ? <span class="badge ok">Verified {fmtDateTime(k.lastVerifiedAt)}</span> : <span class="badge warn">Not verified</span>;
}

export function KeysPage() {
  const keys = useLoad(() => must(api.GET('/api/advisor/provider-keys')));
  const catalogue = useLoad(loadCatalogue);
  const market = useLoad(() => must(api.GET('/api/advisor/market-data-key')));
  const row = useAction();
  const narrow = useNarrow();

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
  const marketName = catalogue.data ? marketDataName(catalogue.data.marketDataProvider) : undefined;

  return (
    <Page title="Keys">
      <p class="hint">Your keys are sent once to this service, which verifies them with the provider and stores them encrypted. This page never keeps them.</p>
      <h2>Language-model keys</h2>
      <Problem error={keys.error ?? row.error} />
      {keys.data && keys.data.items.length === 0 && <p>No key yet. Add one below to talk to the advisor.</p>}
      {keys.data && keys.data.items.length > 0 && (
        <div class="table-wrap">
          <table class="table keys">
            <caption class="sr-only">Your language-model keys</caption>
            <TableHead
              columns={['Provider', { label: 'Key', wide: true }, 'Default model', { label: 'State', wide: true }, { label: 'Actions', srOnly: true }]}
            />
            <tbody>
              {keys.data.items.map((k: Key) => (
                <tr key={k.provider}>
                  <th scope="row">
                    {providerName(k.provider)}
                    {narrow && (
                      <span class="narrow-only hint">
                        <code>…{k.keyHintTail}</code> <KeyState k={k} />
                      </span>
                    )}
                  </th>
                  <td class="wide-only">
                    <code>…{k.keyHintTail}</code>
                  </td>
                  <td>
                    <ModelEditor
                      k={k}
                      catalogue={catalogue.data}
                      onSave={(defaultModel) => patch(k.provider, { defaultModel })}
                      suggestions={catalogue.data?.providers.find((p) => p.provider === k.provider)?.suggestedModels ?? []}
                    />
                  </td>
                  <td class="wide-only">
                    <KeyState k={k} />
                  </td>
                  <td>
                    <div class="actions">
                      {k.active ? (
                        <span class="badge ok">Active</span>
                      ) : (
                        <button type="button" class="secondary small" disabled={row.busy} onClick={() => patch(k.provider, { active: true })}>
                          Make active<span class="sr-only"> {providerName(k.provider)}</span>
                        </button>
                      )}
                      <button type="button" class="danger small" disabled={row.busy} onClick={() => remove(k.provider)}>
                        Delete<span class="sr-only"> {providerName(k.provider)} key</span>
                      </button>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <SaveProviderKey suggestions={catalogue.data?.providers ?? []} onSaved={keys.reload} />

      <h2>Market-data key{marketName ? ` (${marketName})` : ''}</h2>
      <p class="hint">With it the advisor can look up quotes, price history and market hours for you.</p>
      <Problem error={market.error} />
      {market.data && marketName && <MarketDataKey status={market.data} name={marketName} onChange={market.reload} />}
    </Page>
  );
}

/** A key's default model: the hint says how the model being typed is paid, before it is saved. */
function ModelEditor({ k, catalogue, suggestions, onSave }: { k: Key; catalogue: Catalogue | undefined; suggestions: string[]; onSave: (m: string) => void }) {
  const [model, setModel] = useState(k.defaultModel);
  useEffect(() => setModel(k.defaultModel), [k.defaultModel]);
  const id = `models-${k.provider}`;
  return (
    <form
      class="model-editor"
      onSubmit={(e) => {
        e.preventDefault();
        if (model.trim() && model !== k.defaultModel) onSave(model.trim());
      }}
    >
      <input
        aria-label={`Default model for ${providerName(k.provider)}`}
        aria-describedby={`${id}-cost`}
        list={id}
        value={model}
        onInput={(e) => setModel(e.currentTarget.value)}
      />
      <datalist id={id}>
        {suggestions.map((m) => (
          <option key={m} value={m} />
        ))}
      </datalist>
      {model !== k.defaultModel && (
        <button type="submit" class="secondary small">
          Save
        </button>
      )}
      <span id={`${id}-cost`} class="hint">
        {costWords(catalogue, k.provider, model.trim())}
      </span>
    </form>
  );
}

/** A provider's key field: emptied once the key is saved; after a refusal it stays, selected, so a typo can be mended. */
function useKeyField() {
  const [apiKey, setApiKey] = useState('');
  const field = useRef<HTMLInputElement>(null);
  const refused = () =>
    requestAnimationFrame(() => {
      field.current?.focus();
      field.current?.select();
    });
  return { apiKey, setApiKey, field, refused };
}

function SaveProviderKey({ suggestions, onSaved }: { suggestions: { provider: string; suggestedModels: string[] }[]; onSaved: () => void }) {
  const [provider, setProvider] = useState<Provider>('openai');
  const key = useKeyField();
  const [model, setModel] = useState('');
  const [saved, setSaved] = useState<string | undefined>();
  const action = useAction();
  const models = suggestions.find((s) => s.provider === provider)?.suggestedModels ?? [];
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaved(undefined);
    const result = await action.run(() =>
      must(
        api.PUT('/api/advisor/provider-keys/{provider}', {
          params: { path: { provider } },
          body: { apiKey: key.apiKey, ...(model.trim() ? { defaultModel: model.trim() } : {}) },
        }),
      ),
    );
    if (!result) return key.refused();
    key.setApiKey('');
    setSaved(`${providerName(provider)} key …${result.keyHintTail} verified and saved${result.active ? ' (active)' : ''}.`);
    onSaved();
  };
  return (
    <form class="card" onSubmit={submit} autoComplete="off" aria-labelledby="add-key">
      <h3 id="add-key">Add or replace a key</h3>
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
          <input
            ref={key.field}
            type="password"
            name="apiKey"
            required
            value={key.apiKey}
            autoComplete="off"
            spellcheck={false}
            onInput={(e) => key.setApiKey(e.currentTarget.value)}
          />
        </label>
        <label class="grow">
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

function MarketDataKey({ status, name, onChange }: { status: Schemas['MarketDataKeyStatus']; name: string; onChange: () => void }) {
  const key = useKeyField();
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const ok = await action.run(() => must(api.PUT('/api/advisor/market-data-key', { body: { apiKey: key.apiKey } })));
    if (!ok) return key.refused();
    key.setApiKey('');
    onChange();
  };
  const remove = () =>
    confirm(`Delete your ${name} key?`) &&
    action.run(async () => {
      await must(api.DELETE('/api/advisor/market-data-key'));
      onChange();
    });
  return (
    <div class="card">
      {status.configured ? (
        <p class="key-line">
          <span>
            {name} key <code>…{status.keyHintTail}</code> <KeyState k={status} />
          </span>
          <button type="button" class="danger small" onClick={remove} disabled={action.busy}>
            Delete market-data key
          </button>
        </p>
      ) : (
        <p>No market-data key: the advisor can still read your accounts, not the market.</p>
      )}
      <form onSubmit={submit} autoComplete="off">
        <label>
          {status.configured ? `Replace the ${name} key` : `${name} API key`}
          <input
            ref={key.field}
            type="password"
            name="marketDataKey"
            required
            value={key.apiKey}
            autoComplete="off"
            spellcheck={false}
            onInput={(e) => key.setApiKey(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={action.busy}>
          {action.busy ? 'Verifying…' : 'Verify and save'}
        </button>
      </form>
      <Problem error={action.error} />
    </div>
  );
}
