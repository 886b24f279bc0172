import { sql } from 'kysely';
import type { UpgradeState } from '../db/schema.ts';

// How each transition of the instances table changes the upgrade columns (instance-repo.ts): an upgrade keeps the
// image it moves away from until the agent is ready on the new one, and any other operation rolls it back.

/** The image an upgrade moves an instance to. */
export interface UpgradeTarget {
  version: string;
  image: string;
  digest: string;
}

/** An upgrade begins: the image it moves away from is kept to roll back to. */
export const startUpgrade = (t: UpgradeTarget) => ({
  upgrade_from_version: sql<string>`version`,
  upgrade_from_image: sql<string>`image`,
  upgrade_from_digest: sql<string | null>`image_digest`,
  upgrade_to_version: t.version,
  version: t.version,
  image: t.image,
  image_digest: t.digest,
  upgrade_state: 'upgrading' as const,
  upgrade_reason: null,
});

/**
 * An operation that overtakes an upgrade whose agent is not ready yet rolls it back: the row names the kept image
 * again (the recreate that follows runs it). Anything else is left as it is.
 */
export const endUpgrade = (reason: string) => {
  const upgrading = sql`upgrade_state = 'upgrading'`;
  return {
    version: sql<string>`case when ${upgrading} then upgrade_from_version else version end`,
    image: sql<string>`case when ${upgrading} then upgrade_from_image else image end`,
    image_digest: sql<string | null>`case when ${upgrading} then upgrade_from_digest else image_digest end`,
    upgrade_reason: sql<string | null>`case when ${upgrading} then ${reason}::text else upgrade_reason end`,
    upgrade_state: sql<UpgradeState | null>`case when ${upgrading} then 'rolled_back' else upgrade_state end`,
  };
};

/** Ready on the image of an upgrade: the upgrade is done (the kept image is no longer needed to roll back to). */
export const upgradeDone = () => ({
  upgrade_state: sql<UpgradeState | null>`case when upgrade_state = 'upgrading' then 'upgraded' else upgrade_state end`,
});
