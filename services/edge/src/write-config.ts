// Prints the edge's base Caddy configuration (JSON) for the settings in the environment (see settings.ts).
// deploy/start.sh and the testkit start Caddy with it; routes of instances are added later by the route keeper.
import { loadConfig } from '@agenthost/shared';
import { baseConfig } from './caddy-config.ts';
import { edgeSettings } from './settings.ts';

process.stdout.write(`${JSON.stringify(baseConfig(loadConfig(edgeSettings)), null, 2)}\n`);
