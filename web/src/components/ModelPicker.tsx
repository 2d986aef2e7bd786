import { useEffect } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { modelChoices, providerName, type Catalogue, type Provider } from '../catalogue.ts';
import { nextTurnWords } from '../money.ts';
import { useAction } from '../ui.tsx';
import type { Wallet } from '../wallet.ts';

interface ModelChoice {
  readonly provider: Provider;
  readonly model: string;
}

/**
 * Which model the next conversation runs on (the keys' models), and what a turn on it costs. A
 * conversation keeps the model it started with: then the picker shows it, locked.
 */
function ModelPicker(props: {
  choices: readonly { provider: Provider; models: readonly string[] }[];
  selected: ModelChoice | undefined;
  locked: boolean;
  busy: boolean;
  cost: string;
  onChange: (c: ModelChoice) => void;
}) {
  const { selected } = props;
  if (!selected) return null;
  const choices = props.choices.some((c) => c.provider === selected.provider && c.models.includes(selected.model))
    ? props.choices
    : [...props.choices, { provider: selected.provider, models: [selected.model] }];
  return (
    <div class="model-picker">
      <select
        aria-label="Model"
        title={props.locked ? 'A conversation keeps the model it started with' : 'The model of your next conversation (your key’s default model)'}
        disabled={props.locked || props.busy}
        value={`${selected.provider}/${selected.model}`}
        onChange={(e) => {
          const value = e.currentTarget.value;
          const slash = value.indexOf('/');
          props.onChange({ provider: value.slice(0, slash) as Provider, model: value.slice(slash + 1) });
        }}
      >
        {choices.map((c) => (
          <optgroup key={c.provider} label={providerName(c.provider)}>
            {c.models.map((m) => (
              <option key={m} value={`${c.provider}/${m}`}>
                {m}
              </option>
            ))}
          </optgroup>
        ))}
      </select>
      <span class="hint cost" data-testid="model-cost">
        {props.cost}
      </span>
    </div>
  );
}

/** The model picker beside the box: the active key's default model for a new conversation, a conversation's own model otherwise. */
export function ModelChooser(props: {
  conversation: Schemas['ConversationWithMessages'] | undefined;
  keys: Schemas['ProviderKeyList'] | undefined;
  catalogue: Catalogue | undefined;
  wallet: Wallet | undefined;
  onKeysChanged: () => void;
  onProblem: (err: unknown) => void;
}) {
  const { conversation, keys, catalogue, wallet } = props;
  const action = useAction();
  const active = keys?.items.find((k) => k.active);
  const selected: ModelChoice | undefined = conversation
    ? { provider: conversation.provider, model: conversation.model }
    : active
      ? { provider: active.provider, model: active.defaultModel }
      : undefined;
  const choose = (c: ModelChoice) =>
    action.run(async () => {
      await must(
        api.PATCH('/api/advisor/provider-keys/{provider}', { params: { path: { provider: c.provider } }, body: { defaultModel: c.model, active: true } }),
      );
      props.onKeysChanged();
    });
  useEffect(() => {
    if (action.error) props.onProblem(action.error);
  }, [action.error]);
  return (
    <ModelPicker
      choices={modelChoices(catalogue, keys?.items ?? [])}
      selected={selected}
      locked={conversation !== undefined}
      busy={action.busy}
      cost={selected ? nextTurnWords(catalogue, wallet, selected.provider, selected.model) : ''}
      onChange={(c) => void choose(c)}
    />
  );
}
