// The default model of a saved key (spec 4.2 rule 6, DESIGN §6). Every rule below depends only on
// the set of model ids, never on the order the provider listed them in.
import { BUILT_IN_CATALOGUE, findModel, type Catalogue, type Provider } from '../../catalogue.ts';

/**
 * Ids that name something other than a chat model. Matched as whole dash/slash/dot-separated
 * words or word prefixes, so `gpt-4o-search-preview` and `text-embedding-3` are out but a
 * hypothetical `researcher` model is not.
 */
const NON_CHAT = /(^|[-_/.:])(embed|whisper|tts|audio|speech|transcribe|dall-e|image|veo|sora|moderation|realtime|search|rerank|guard|babbage|davinci|aqa)/i;

function isChatModel(id: string): boolean {
  return !NON_CHAT.test(id);
}

/** A preference names a model or its dated snapshots (`claude-haiku-4-5` → `claude-haiku-4-5-20251001`). */
function snapshotOf(preference: string, id: string): boolean {
  if (!id.startsWith(`${preference}-`)) return false;
  return /^(\d{8}|\d{4}-\d{2}-\d{2})$/.test(id.slice(preference.length + 1));
}

/** Code-unit order, so the result never depends on the runtime's locale. */
const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The provider's configured preference order; the built-in one when the catalogue names none. */
function preferences(catalogue: Catalogue, provider: Provider): readonly string[] {
  const configured = catalogue.providerDefaults[provider];
  return configured && configured.length > 0 ? configured : (BUILT_IN_CATALOGUE.providerDefaults[provider] ?? []);
}

/**
 * The default model:
 * 1. the first preference present in the list (exactly, else its newest dated snapshot);
 * 2. else, among chat models, the code-unit-smallest id the catalogue prices (so it can be used);
 * 3. else the code-unit-smallest chat model;
 * 4. with no list (transient probe) or no chat model at all: the first configured preference.
 */
export function chooseDefaultModel(catalogue: Catalogue, provider: Provider, models: readonly string[] | undefined): string {
  const prefs = preferences(catalogue, provider);
  const configured = prefs[0] ?? '';
  if (models === undefined) return configured;
  const ids = new Set(models);
  for (const p of prefs) {
    if (ids.has(p)) return p;
    const snapshots = [...ids].filter((id) => snapshotOf(p, id)).sort(byCodeUnit);
    const newest = snapshots.at(-1);
    if (newest !== undefined) return newest;
  }
  const chat = [...ids].filter(isChatModel).sort(byCodeUnit);
  return chat.find((id) => findModel(catalogue, provider, id) !== undefined) ?? chat[0] ?? configured;
}

/** A model the user asked for is in the list exactly or as an alias of a dated snapshot there. */
export function modelListed(models: readonly string[], model: string): boolean {
  return models.some((id) => id === model || snapshotOf(model, id));
}
