import { z } from 'zod';
import { baseConfig, configInt } from '@agenthost/shared';
import { edgeSettings } from './settings.ts';

// Each setting's description is the text docs/configuration.md shows for it (deploy/config-doc.ts prints the page).
export const edgeConfig = baseConfig.extend({
  ...edgeSettings.shape,
  EDGE_RESYNC_SECONDS: configInt(15).describe(
    'The route keeper reads the whole route table this often (events update it at once): it catches a Caddy restart and any change no event announced.',
  ),
  EDGE_ACTIVITY_SECONDS: configInt(10).describe(
    'The route keeper reports which instances had traffic to the provisioner this often (idle sleep); keep it well under the idle times.',
  ),
  EDGE_NODE_ID: z
    .string()
    .default('')
    .describe("Swarm only: this node's id (the stack sets it from the task's node); set, the edge serves its node's container stats to the provisioner."),
  EDGE_CGROUP_ROOT: z.string().default('/sys/fs/cgroup').describe("Where the host's /sys/fs/cgroup is mounted (read-only) for those stats."),
});
