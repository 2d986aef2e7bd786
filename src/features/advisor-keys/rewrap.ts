// DESIGN §5 rotation: re-encrypt every stored key under the keyring's first key. The core of
// `npm run keys:rewrap`, kept here so it runs in-process in tests.
import type { Db } from '../../db/types.ts';
import { VaultError, type SecretSlot, type Vault } from '../../platform/vault.ts';
import * as repo from './repo.ts';
import { marketDataSlot, providerSlot, sealedColumns, sealedOf } from './sealing.ts';

interface RewrapCounts {
  /** Re-encrypted by this run. */
  rewrapped: number;
  /** Already under the primary key (untouched). */
  alreadyCurrent: number;
  /** Could not be decrypted (key id not in the keyring, or tampered); left as they were. */
  failed: number;
}

export interface RewrapReport {
  readonly primaryKeyId: string;
  readonly providerKeys: RewrapCounts;
  readonly marketDataKeys: RewrapCounts;
  /** Slots that failed, for the operator (user ids and provider names, no key material). */
  readonly failures: readonly { table: 'provider_keys' | 'market_data_keys'; userId: string; provider: string }[];
}

type Outcome = 'rewrapped' | 'current' | 'failed' | 'gone';

/**
 * Row by row, each in its own short transaction holding the row lock, so a save that lands
 * meanwhile is either seen (and left alone, being under the primary key already) or waits and
 * then replaces the rewrapped row; it is never overwritten by a stale ciphertext.
 */
export async function rewrapAllKeys(deps: { readonly db: Db; readonly vault: Vault }, batchSize = 200): Promise<RewrapReport> {
  const primary = deps.vault.primaryKeyId;
  const failures: RewrapReport['failures'][number][] = [];
  const counts = async (table: 'provider_keys' | 'market_data_keys'): Promise<RewrapCounts> => ({
    rewrapped: 0,
    alreadyCurrent: (await repo.countByKeyId(deps.db, table, primary)).current,
    failed: 0,
  });
  const providerKeys = await counts('provider_keys');
  const marketDataKeys = await counts('market_data_keys');
  const tally = (c: RewrapCounts, o: Outcome): void => {
    if (o === 'rewrapped') c.rewrapped++;
    else if (o === 'current') c.alreadyCurrent++;
    else if (o === 'failed') c.failed++;
  };

  // Keyset order: failed rows stay stale, so paging past them is what ends the loop.
  let after: { userId: string; provider: string } | undefined;
  for (;;) {
    const batch = await repo.staleProviderKeys(deps.db, primary, after, batchSize);
    for (const { user_id: userId, provider } of batch) {
      const outcome = await deps.db.transaction().execute(async (trx) => {
        const row = await repo.lockProviderKey(trx, userId, provider);
        return reseal(deps.vault, row, providerSlot(userId, provider), (s) => repo.resealProviderKey(trx, userId, provider, s));
      });
      tally(providerKeys, outcome);
      if (outcome === 'failed') failures.push({ table: 'provider_keys', userId, provider });
    }
    const last = batch.at(-1);
    if (!last) break;
    after = { userId: last.user_id, provider: last.provider };
  }

  let afterUser: string | undefined;
  for (;;) {
    const batch = await repo.staleMarketDataKeys(deps.db, primary, afterUser, batchSize);
    for (const { user_id: userId } of batch) {
      const [outcome, provider] = await deps.db.transaction().execute(async (trx) => {
        const row = await repo.lockMarketDataKey(trx, userId);
        const slot = marketDataSlot(userId, row?.provider ?? '');
        return [await reseal(deps.vault, row, slot, (s) => repo.resealMarketDataKey(trx, userId, s)), slot.provider] as const;
      });
      tally(marketDataKeys, outcome);
      if (outcome === 'failed') failures.push({ table: 'market_data_keys', userId, provider });
    }
    const last = batch.at(-1);
    if (!last) break;
    afterUser = last.user_id;
  }
  return { primaryKeyId: primary, providerKeys, marketDataKeys, failures };
}

async function reseal(
  vault: Vault,
  row: repo.SealedColumns | undefined,
  slot: SecretSlot,
  write: (sealed: repo.SealedColumns) => Promise<void>,
): Promise<Outcome> {
  // Deleted, or saved again under the primary key, since the batch was read.
  if (!row) return 'gone';
  if (row.key_id === vault.primaryKeyId) return 'current';
  let plaintext: string;
  try {
    plaintext = vault.open(sealedOf(row), slot);
  } catch (err) {
    if (err instanceof VaultError) return 'failed';
    throw err;
  }
  await write(sealedColumns(vault.seal(plaintext, slot)));
  return 'rewrapped';
}
