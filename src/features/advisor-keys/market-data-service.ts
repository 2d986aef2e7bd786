import type { Deps } from '../../deps.ts';
import { MARKET_DATA_PROVIDERS, type MarketDataProvider } from '../../config.ts';
import { AppError } from '../../http/errors.ts';
import * as repo from './repo.ts';
import type { SealedColumns } from './repo.ts';
import { VaultError } from '../../platform/vault.ts';
import { hintTail, marketDataSlot, sealedColumns, sealedOf } from './sealing.ts';
import type { MarketDataKeyStatusDto, SaveMarketDataKeyInput } from './schemas.ts';
import { probeResultLabel } from '../../platform/metrics.ts';

type KeyDeps = Pick<Deps, 'db' | 'clock' | 'vault' | 'config' | 'metrics' | 'logger' | 'marketData'>;

const NOT_CONFIGURED: MarketDataKeyStatusDto = {
  configured: false,
  keyHintTail: null,
  verified: false,
  provider: null,
  lastVerifiedAt: null,
  rejectedAt: null,
  rejectedReason: null,
  updatedAt: null,
};

function toStatus(row: repo.MarketDataKeyRow): MarketDataKeyStatusDto {
  return {
    configured: true,
    keyHintTail: row.key_hint_tail,
    // A key is verified when the probe at its save accepted it (lastVerifiedAt is that moment).
    verified: row.last_verified_at !== null,
    provider: MARKET_DATA_PROVIDERS.find((p) => p === row.provider) ?? null,
    lastVerifiedAt: row.last_verified_at?.toISOString() ?? null,
    rejectedAt: row.rejected_at?.toISOString() ?? null,
    rejectedReason: row.rejected_reason,
    updatedAt: row.updated_at.toISOString(),
  };
}

/**
 * Spec 4.1: the configured provider's probe decides; a refusal (401/403) stores nothing and leaves
 * an earlier key as it was; a transient failure stores the key unverified.
 */
export async function saveMarketDataKey(deps: KeyDeps, userId: string, input: SaveMarketDataKeyInput): Promise<MarketDataKeyStatusDto> {
  const apiKey = input.apiKey.trim();
  const provider: MarketDataProvider = deps.marketData.provider;
  const probe = await deps.marketData.probe(apiKey);
  deps.metrics.keyProbes.inc({ provider, result: probeResultLabel(probe) });
  if (probe.outcome === 'invalid') throw new AppError('MARKET_DATA_KEY_INVALID', `${provider} rejected the key (HTTP ${probe.status})`);
  if (probe.outcome === 'transient') deps.logger.info({ provider, reason: probe.reason }, 'market-data key stored unverified');

  const now = deps.clock.now();
  const row = await repo.upsertMarketDataKey(deps.db, {
    user_id: userId,
    provider,
    ...sealedColumns(deps.vault.seal(apiKey, marketDataSlot(userId, provider))),
    key_hint_tail: hintTail(apiKey),
    last_verified_at: probe.outcome === 'valid' ? now : null,
    rejected_at: null,
    rejected_reason: null,
    created_at: now,
    updated_at: now,
  });
  return toStatus(row);
}

export async function marketDataKeyStatus(deps: Pick<Deps, 'db'>, userId: string): Promise<MarketDataKeyStatusDto> {
  const row = await repo.findMarketDataKey(deps.db, userId);
  return row ? toStatus(row) : NOT_CONFIGURED;
}

export async function deleteMarketDataKey(deps: Pick<Deps, 'db'>, userId: string): Promise<void> {
  if (!(await repo.deleteMarketDataKey(deps.db, userId))) throw new AppError('MARKET_DATA_KEY_NOT_FOUND', 'no market-data key is saved');
}

/** The user's market-data key as the advisor's tools use it. */
export interface UsableMarketDataKey {
  readonly apiKey: string;
  /** The stored key's sealing nonce: every save (and rewrap) seals anew, so it names this stored key exactly. */
  readonly version: Uint8Array;
}

/**
 * A stored market-data key, decrypted, or undefined when the advisor cannot use it: one for a
 * provider the service no longer reads, or one that cannot be decrypted (logged; saving it again is
 * the remedy).
 */
export function openMarketDataKey(
  deps: Pick<Deps, 'vault' | 'logger' | 'marketData'>,
  row: SealedColumns & { user_id: string; provider: string },
): UsableMarketDataKey | undefined {
  if (row.provider !== deps.marketData.provider) return undefined;
  try {
    return { apiKey: deps.vault.open(sealedOf(row), marketDataSlot(row.user_id, row.provider)), version: row.nonce };
  } catch (err) {
    if (!(err instanceof VaultError)) throw err;
    deps.logger.warn({ userId: row.user_id, provider: row.provider, keyId: row.key_id }, 'stored market-data key failed to decrypt');
    return undefined;
  }
}

/**
 * DESIGN §11/§13: the provider refused the stored key during a turn (401/403). It is marked
 * unverified, with when and why, so the client can ask for a new one; a key saved since then is
 * another key and stays as it is.
 */
export async function markMarketDataKeyRefused(
  deps: Pick<Deps, 'db' | 'logger' | 'clock'>,
  userId: string,
  key: UsableMarketDataKey,
  status: number | undefined,
): Promise<void> {
  const reason = `the market-data provider refused the key${status === undefined ? '' : ` (HTTP ${status})`} during an advisor turn`;
  if (await repo.markKeyRejected(deps.db, 'market_data_keys', userId, key.version, deps.clock.now(), reason)) {
    deps.logger.info({ userId }, 'market-data key refused during a turn: marked unverified');
  }
}
