import type { Deps } from '../../deps.ts';
import * as repo from './repo.ts';

const SEEN_MAX = 50_000;

/**
 * Makes sure the token's user exists. Users are cached per process once written, so an
 * authenticated request costs no write after the first.
 */
export async function ensureUser(deps: Pick<Deps, 'db' | 'config' | 'seenUsers'>, id: string, tierClaim: string | undefined): Promise<void> {
  const tier = tierClaim !== undefined && Object.hasOwn(deps.config.catalogue.tiers, tierClaim) ? tierClaim : null;
  const cacheKey = `${id}\u0000${tier ?? ''}`;
  if (deps.seenUsers.has(cacheKey)) return;
  await repo.upsertUser(deps.db, id, tier);
  if (deps.seenUsers.size >= SEEN_MAX) deps.seenUsers.clear();
  deps.seenUsers.add(cacheKey);
}

/**
 * The user's tier name: stored tier if it still exists in the catalogue, else the default. A turn's
 * reservation applies the same rule in SQL (billing's reserve_turn).
 */
export async function userTier(deps: Pick<Deps, 'db' | 'config'>, id: string): Promise<string> {
  const stored = await repo.findUserTier(deps.db, id);
  const tiers = deps.config.catalogue.tiers;
  return stored && Object.hasOwn(tiers, stored) ? stored : deps.config.catalogue.defaultTier;
}

export async function setTier(deps: Pick<Deps, 'db' | 'config'>, id: string, tier: string): Promise<void> {
  if (!Object.hasOwn(deps.config.catalogue.tiers, tier)) {
    throw new Error(`unknown tier "${tier}"; the catalogue has ${Object.keys(deps.config.catalogue.tiers).join(', ')}`);
  }
  await repo.setUserTier(deps.db, id, tier);
}
