import { useEffect, useRef, useState } from 'preact/hooks';
import { api, must, type Schemas } from '../api/client.ts';
import { modelChoices, providerName, type Catalogue, type Provider } from '../catalogue.ts';
import { nextTurnWords } from '../money.ts';
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
        disabled={props.locked}
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
  const active = keys?.items.find((k) => k.active);
  const stored: ModelChoice | undefined = active && { provider: active.provider, model: active.defaultModel };
  // The pick shows at once and the select stays enabled (the keyboard keeps walking it); the picks are
  // stored one at a time, and only the last of those made meanwhile, so the stored default is the last.
  const [picked, setPicked] = useState<ModelChoice | undefined>();
  const latest = useRef<ModelChoice | undefined>(undefined);
  const storing = useRef<Promise<void>>(Promise.resolve());
  // Once stored, the pick is the keys' own again; a later pick made before this effect ran stays.
  useEffect(() => {
    setPicked((p) => (p && stored && p.provider === stored.provider && p.model === stored.model ? undefined : p));
  }, [stored?.provider, stored?.model]);
  const selected: ModelChoice | undefined = conversation ? { provider: conversation.provider, model: conversation.model } : (picked ?? stored);
  const choose = (c: ModelChoice) => {
    setPicked(c);
    latest.current = c;
    storing.current = storing.current.then(async () => {
      if (latest.current !== c) return;
      try {
        await must(
          api.PATCH('/api/advisor/provider-keys/{provider}', { params: { path: { provider: c.provider } }, body: { defaultModel: c.model, active: true } }),
        );
        if (latest.current === c) props.onKeysChanged();
      } catch (err) {
        if (latest.current === c) setPicked(undefined);
        props.onProblem(err);
      }
    });
  };
  return (
    <ModelPicker
      choices={modelChoices(catalogue, keys?.items ?? [])}
      selected={selected}
      locked={conversation !== undefined}
      cost={selected ? nextTurnWords(catalogue, wallet, selected.provider, selected.model) : ''}
      onChange={choose}
    />
  );
}
