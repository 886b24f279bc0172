import { FILE_SECRETS } from '@agenthost/shared';
import { authConfig } from '../../../services/auth/src/config.ts';
import { billingConfig } from '../../../services/billing-chain/src/config.ts';
import { edgeConfig } from '../../../services/edge/src/config.ts';
import { gatewayConfig } from '../../../services/gateway/src/config.ts';
import { keyvaultConfig } from '../../../services/keyvault/src/config.ts';
import { provisionerConfig } from '../../../services/provisioner/src/config.ts';

/**
 * Which settings each part of the stack is given: the names its own configuration schema reads, nothing else. The
 * operator's agenthost.env is one file for the whole deployment; handed whole to every task, it put (say) keyvault's
 * master key or the provisioner's S3 secret into the edge's environment, where any compromise of the edge (the one
 * part facing the internet) would read it. The schemas are the services' own, so a new setting needs no list here.
 */
const SCHEMAS = {
  gateway: gatewayConfig,
  auth: authConfig,
  'billing-chain': billingConfig,
  provisioner: provisionerConfig,
  keyvault: keyvaultConfig,
  edge: edgeConfig,
};

export type ConfiguredPart = keyof typeof SCHEMAS;

/** The names a part reads: its schema's, and <NAME>_FILE for each of them that may come from a file (parseConfig). */
export function allowedNames(part: ConfiguredPart): Set<string> {
  const schema = SCHEMAS[part];
  // auth's schema ends in a transform (a pipe): its names are those of the object it reads first.
  const names = new Set(Object.keys('shape' in schema ? schema.shape : schema.in.shape));
  for (const name of FILE_SECRETS) if (names.has(name)) names.add(`${name}_FILE`);
  return names;
}

/** `env` with only the names `part` reads. */
export function ownEnv(part: ConfiguredPart, env: Record<string, string>): Record<string, string> {
  const allowed = allowedNames(part);
  return Object.fromEntries(Object.entries(env).filter(([name]) => allowed.has(name)));
}

/** The operator's settings that no part reads (a typo, or a single-host setting): the deploy names them. */
export function unusedNames(env: Record<string, string>): string[] {
  const used = new Set(Object.keys(SCHEMAS).flatMap((p) => [...allowedNames(p as ConfiguredPart)]));
  return Object.keys(env).filter((name) => !used.has(name));
}
