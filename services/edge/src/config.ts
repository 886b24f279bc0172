import { baseConfig, configInt } from '@agenthost/shared';
import { edgeSettings } from './settings.ts';

export const edgeConfig = baseConfig.extend({
  ...edgeSettings.shape,
  /** A full pass over the route table this often (catches a Caddy restart and any change no event announced). */
  EDGE_RESYNC_SECONDS: configInt(15),
});
