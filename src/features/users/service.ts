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
 * The user's tier name: the stored tier if the catalogue still has it, else the catalogue's default.
 * The rule is written once, as the database function user_tier, because a turn's reservation must
 * apply it inside its one statement.
 */
export async function userTier(deps: Pick<Deps, 'db' | 'config'>, id: string): Promise<string> {
  const { tiers, defaultTier } = deps.config.catalogue;
  return repo.effectiveTier(deps.db, id, JSON.stringify(tiers), defaultTier);
}

export async function setTier(deps: Pick<Deps, 'db' | 'config'>, id: string, tier: string): Promise<void> {
  if (!Object.hasOwn(deps.config.catalogue.tiers, tier)) {
    throw new Error(`unknown tier "${tier}"; the catalogue has ${Object.keys(deps.config.catalogue.tiers).join(', ')}`);
  }
  await repo.setUserTier(deps.db, id, tier);
}
