// The edge as one swarm task (deploy/swarm): Caddy and its route keeper side by side in one container, as a single
// host runs them side by side under its supervisor. Caddy gets the same base configuration (write-config.ts), and
// the two live and die together: when Caddy exits the task exits, and the swarm starts a new one.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '@agenthost/shared';
import { baseConfig } from './caddy-config.ts';
import { dataDir, edgeSettings } from './settings.ts';

const settings = loadConfig(edgeSettings);
const configFile = path.join(path.dirname(dataDir(settings)), 'caddy.json');
mkdirSync(dataDir(settings), { recursive: true });
writeFileSync(configFile, JSON.stringify(baseConfig(settings)));
const caddy = spawn('/usr/bin/caddy', ['run', '--config', configFile], {
  env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dataDir(settings), XDG_DATA_HOME: dataDir(settings), XDG_CONFIG_HOME: dataDir(settings) },
  stdio: ['ignore', 'inherit', 'inherit'],
});
caddy.once('exit', (code, signal) => {
  process.stderr.write(`caddy exited (${signal ?? code}); the edge task ends with it\n`);
  process.exit(1);
});
// The keeper's own shutdown (SIGTERM from the swarm) ends Caddy too.
process.once('exit', () => caddy.kill('SIGTERM'));
await import('./main.ts');
