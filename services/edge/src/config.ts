import { z } from 'zod';
import { baseConfig, configInt } from '@agenthost/shared';
import { edgeSettings } from './settings.ts';

export const edgeConfig = baseConfig.extend({
  ...edgeSettings.shape,
  /** A full pass over the route table this often (catches a Caddy restart and any change no event announced). */
  EDGE_RESYNC_SECONDS: configInt(15),
  /** Which instances had traffic is reported to the provisioner this often (idle sleep); keep it well under the idle times. */
  EDGE_ACTIVITY_SECONDS: configInt(10),
  /** Swarm only: this node's id (the stack sets it from the task's node); set, the edge serves its node's container stats. */
  EDGE_NODE_ID: z.string().default(''),
  /** Where the host's /sys/fs/cgroup is mounted (read-only) for those stats. */
  EDGE_CGROUP_ROOT: z.string().default('/sys/fs/cgroup'),
});
