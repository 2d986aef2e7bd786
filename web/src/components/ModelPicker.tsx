import { providerName, type Provider } from '../catalogue.ts';

export interface ModelChoice {
  readonly provider: Provider;
  readonly model: string;
}

/**
 * Which model the next conversation runs on (the keys' models), and what a turn on it costs. A
 * conversation keeps the model it started with: then the picker shows it, locked.
 */
export function ModelPicker(props: {
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
