// Money and usage in words, the same wherever they are shown: a reply's footer, its export, the
// composer's cost of the next turn, the credits page.
import type { Schemas } from './api/client.ts';
import type { Catalogue } from './catalogue.ts';
import { modelEntry } from './catalogue.ts';
import { fmtNumber, fmtUsd } from './format.ts';
import type { Wallet } from './wallet.ts';

type Usage = Schemas['Usage'];
type Billing = NonNullable<Schemas['Message']['billing']>;

const plural = (n: number, one: string, many = `${one}s`): string => `${fmtNumber(n)} ${n === 1 ? one : many}`;

/** What a reply used on the trader's own key: "1,200 tokens in · 300 out · ≈ $0.0004 on your key". */
export function usageWords(u: Usage): string {
  const bits: string[] = [];
  if (u.inputTokens !== null || u.outputTokens !== null) bits.push(`${fmtNumber(u.inputTokens)} tokens in · ${fmtNumber(u.outputTokens)} out`);
  if (u.estimatedCostUsd !== null) {
    const cost = fmtUsd(u.estimatedCostUsd);
    bits.push(`${cost.startsWith('<') ? '' : '≈ '}${cost} on your key`);
  }
  return bits.join(' · ');
}

/** What a turn was charged here: "1 free turn", "5 credits", "free", or "not charged" when it produced nothing. */
export function chargeWords(b: Pick<Billing, 'source' | 'credits'> & { status?: Billing['status'] }): string {
  if (b.status === 'returned') return 'not charged (nothing was produced)';
  if (b.source === 'allowance') return '1 free turn';
  if (b.source === 'credits') return plural(b.credits, 'credit');
  return 'free';
}

/** What the next turn on this model will cost, against what the trader has: "Free turn · 182 left", "5 credits a turn · you have 40". */
export function nextTurnWords(c: Catalogue | undefined, w: Wallet | undefined, provider: string, model: string): string {
  if (!c) return '';
  const entry = modelEntry(c, provider, model);
  if (!entry) return 'Not offered here';
  if (entry.allowance) {
    if (w && w.allowance.remaining === 0) return `Free turns used up · ${plural(entry.creditsPerTurn, 'credit')} a turn`;
    return w ? `Free turn · ${fmtNumber(w.allowance.remaining)} left` : 'Free turn';
  }
  return `${plural(entry.creditsPerTurn, 'credit')} a turn${w ? ` · you have ${fmtNumber(w.credits)}` : ''}`;
}

/** What one credit of a pack costs: "$0.05 per credit". */
export function perCredit(amount: number, credits: number, currency: string): string {
  const each = amount / 100 / credits;
  return `${each.toLocaleString(undefined, { style: 'currency', currency: currency.toUpperCase(), minimumFractionDigits: 2, maximumFractionDigits: 4 })} per credit`;
}
