import type { Deps } from '../../deps.ts';
import { PROVIDERS, type Provider } from '../../catalogue.ts';
import { UNIQUE_VIOLATION, pgErrorCode } from '../../db/create-db.ts';
import type { RawBuilder } from 'kysely';
import { AppError } from '../../http/errors.ts';
import { VaultError } from '../../platform/vault.ts';
import { probeResultLabel } from '../../platform/metrics.ts';
import type { ProviderProbeResult } from '../../providers/llm/index.ts';
import { chooseDefaultModel, modelListed } from './default-model.ts';
import { openMarketDataKey, type UsableMarketDataKey } from './market-data-service.ts';
import * as repo from './repo.ts';
import { hintTail, providerSlot, sealedColumns, sealedOf } from './sealing.ts';
import type { ProviderKeyListItemDto, SavedProviderKeyDto, SaveProviderKeyInput, UpdateProviderKeyInput } from './schemas.ts';

type KeyDeps = Pick<Deps, 'db' | 'clock' | 'vault' | 'config' | 'metrics' | 'logger' | 'llm'>;

// Far more than the providers a user can save at once (each collision means another save won).
const SAVE_ATTEMPTS = 10;

export interface UsableProviderKey {
  readonly provider: Provider;
  readonly model: string;
  readonly apiKey: string;
  /**
   * The stored key's sealing nonce: every save (and rewrap) seals anew, so it names this stored key exactly. A copy
   * of its own: the driver's buffer is a slice of an 8 KiB slab a running turn would keep alive.
   */
  readonly version: Uint8Array;
}

/** The keys a turn runs on. */
export interface TurnKeys {
  /**
   * The provider key, or why there is none (409 PROVIDER_KEY_NOT_CONFIGURED / PROVIDER_KEY_DECRYPTION_FAILED),
   * kept as a value so the turn raises it in its place.
   */
  readonly key: UsableProviderKey | AppError;
  /** The market-data key the advisor's market tools use, when one it can use is stored. */
  readonly marketKey: UsableMarketDataKey | undefined;
}

export type { TurnKeyRow } from './repo.ts';

/** The keys a turn's part of a statement read (`turnKeysPart`), decrypted, or why the provider key cannot be used. */
export function openTurnKeys(deps: Pick<Deps, 'vault' | 'logger' | 'marketData'>, provider: Provider | null, rows: readonly repo.TurnKeyRow[]): TurnKeys {
  const keyRow = rows.find((r) => r.kind === 'provider');
  const marketRow = rows.find((r) => r.kind === 'market');
  const key = keyRow
    ? usable(deps, keyRow)
    : new AppError(
        'PROVIDER_KEY_NOT_CONFIGURED',
        provider === null
          ? 'no active provider key; save one with PUT /api/advisor/provider-keys/{provider}'
          : `no ${provider} key is saved; save one with PUT /api/advisor/provider-keys/${provider}`,
      );
  return { key, marketKey: marketRow ? openMarketDataKey(deps, marketRow) : undefined };
}

/** A turn's key rows in one round trip (`provider`: its name, or an expression naming it; null: the active key). */
export async function readTurnKeys(deps: Pick<Deps, 'db'>, userId: string, provider: RawBuilder<string> | string | null): Promise<repo.TurnKeyRow[]> {
  const { rows } = await repo.turnKeysQuery(userId, provider).execute(deps.db);
  return rows;
}

/** The keys feature's part of a turn's start statement: the turn's key rows (`provider`: an expression of that statement; null: the active key). */
export const turnKeysPart =
  (userId: string) =>
  (provider: RawBuilder<string> | null): RawBuilder<repo.TurnKeyRow> =>
    repo.turnKeysQuery(userId, provider);

function usable(deps: Pick<Deps, 'vault' | 'logger'>, row: repo.TurnKeyRow): UsableProviderKey | AppError {
  const provider = asProvider(row.provider);
  try {
    const apiKey = deps.vault.open(sealedOf(row), providerSlot(row.user_id, row.provider));
    return { provider, model: row.default_model ?? '', apiKey, version: new Uint8Array(row.nonce) };
  } catch (err) {
    if (!(err instanceof VaultError)) throw err;
    // Which slot failed helps an operator after a keyring change; the cause never carries key material.
    deps.logger.warn({ userId: row.user_id, provider, keyId: row.key_id }, 'stored provider key failed to decrypt');
    return new AppError('PROVIDER_KEY_DECRYPTION_FAILED', `the stored ${provider} key cannot be decrypted; save it again`);
  }
}

function asProvider(name: string): Provider {
  const found = PROVIDERS.find((p) => p === name);
  // Rows are only written through ProviderSchema-validated routes; anything else is corruption.
  if (!found) throw new Error(`provider_keys holds an unknown provider "${name}"`);
  return found;
}

function toItem(row: repo.ProviderKeyRow): ProviderKeyListItemDto {
  return {
    provider: asProvider(row.provider),
    keyHintTail: row.key_hint_tail,
    defaultModel: row.default_model,
    active: row.active,
    verified: row.last_verified_at !== null,
    lastVerifiedAt: row.last_verified_at?.toISOString() ?? null,
    rejectedAt: row.rejected_at?.toISOString() ?? null,
    rejectedReason: row.rejected_reason,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/**
 * Spec 4.2: probe (no transaction is open across it), refuse a rejected key, pick the default model,
 * then store the sealed key as the user's one active key.
 */
export async function saveProviderKey(deps: KeyDeps, userId: string, provider: Provider, input: SaveProviderKeyInput): Promise<SavedProviderKeyDto> {
  const apiKey = input.apiKey.trim();
  const probe: ProviderProbeResult = await deps.llm.probe(provider, apiKey);
  deps.metrics.keyProbes.inc({ provider, result: probeResultLabel(probe) });
  if (probe.outcome === 'invalid') throw new AppError('PROVIDER_KEY_INVALID', `${provider} rejected the key (HTTP ${probe.status})`);
  if (probe.outcome === 'transient') deps.logger.info({ provider, reason: probe.reason }, 'provider key stored unverified');

  const models = probe.outcome === 'valid' ? probe.models : undefined;
  if (input.defaultModel !== undefined && models !== undefined && !modelListed(models, input.defaultModel)) {
    const message = `${provider} does not list this model for the key`;
    throw new AppError('VALIDATION_ERROR', `/defaultModel: ${message}`, { details: [{ path: '/defaultModel', message }] });
  }
  const defaultModel = input.defaultModel ?? chooseDefaultModel(deps.config.catalogue, provider, models);

  const sealed = sealedColumns(deps.vault.seal(apiKey, providerSlot(userId, provider)));
  const now = deps.clock.now();
  const stored: repo.ProviderKeyRow = {
    user_id: userId,
    provider,
    ...sealed,
    key_hint_tail: hintTail(apiKey),
    default_model: defaultModel,
    active: true,
    last_verified_at: probe.outcome === 'valid' ? now : null,
    rejected_at: null,
    rejected_reason: null,
    created_at: now,
    updated_at: now,
  };
  // DESIGN §6: saving makes this the active key. Only a concurrent save for the same user can
  // collide (on the partial unique index); each retry sees the winner and deactivates it.
  let row: repo.ProviderKeyRow | undefined;
  for (let attempt = 1; row === undefined; attempt++) {
    try {
      row = await repo.saveActiveProviderKey(deps.db, stored);
    } catch (err) {
      if (pgErrorCode(err) !== UNIQUE_VIOLATION || attempt >= SAVE_ATTEMPTS) throw err;
    }
  }
  return toItem(row);
}

/**
 * DESIGN §13: the provider refused the key during a turn (401/403): it is marked unverified with when
 * and why, so the client can ask for a new key instead of failing turn after turn. A key saved since
 * the turn began is another key and stays as it is.
 */
export async function markProviderKeyRejected(
  deps: Pick<Deps, 'db' | 'logger' | 'clock'>,
  userId: string,
  key: UsableProviderKey,
  status: number | undefined,
): Promise<void> {
  const reason = `${key.provider} refused the key${status === undefined ? '' : ` (HTTP ${status})`} during an advisor turn`;
  if (await repo.markKeyRejected(deps.db, 'provider_keys', userId, key.version, deps.clock.now(), reason)) {
    deps.logger.info({ userId, provider: key.provider }, 'provider key refused during a turn: marked unverified');
  }
}

export async function listProviderKeys(deps: Pick<Deps, 'db'>, userId: string): Promise<ProviderKeyListItemDto[]> {
  return (await repo.listProviderKeys(deps.db, userId)).map(toItem);
}

/** DESIGN §6: `active: true` moves the active flag here; `active: false` leaves the user with none. */
export async function updateProviderKey(
  deps: Pick<Deps, 'db' | 'clock'>,
  userId: string,
  provider: Provider,
  input: UpdateProviderKeyInput,
): Promise<ProviderKeyListItemDto> {
  const now = deps.clock.now();
  const row = await deps.db.transaction().execute(async (trx) => {
    await repo.lockUserKeys(trx, userId);
    const current = await repo.findProviderKey(trx, userId, provider);
    if (!current) throw new AppError('PROVIDER_KEY_NOT_FOUND', `no ${provider} key is saved`);
    const patch = {
      ...(input.defaultModel !== undefined && input.defaultModel !== current.default_model ? { default_model: input.defaultModel } : {}),
      ...(input.active !== undefined && input.active !== current.active ? { active: input.active } : {}),
    };
    if (Object.keys(patch).length === 0) return current;
    if (patch.active === true) await repo.deactivateOthers(trx, userId, provider, now);
    return (await repo.updateProviderKey(trx, userId, provider, { ...patch, updated_at: now })) ?? current;
  });
  return toItem(row);
}

export async function deleteProviderKey(deps: Pick<Deps, 'db'>, userId: string, provider: Provider): Promise<void> {
  if (!(await repo.deleteProviderKey(deps.db, userId, provider))) throw new AppError('PROVIDER_KEY_NOT_FOUND', `no ${provider} key is saved`);
}
