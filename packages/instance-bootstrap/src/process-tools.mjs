// The bootstrap's plain process tools, apart from its flow (bootstrap.mjs): its JSON logger and the PATH lookup of the
// agent's command. Node built-ins only, like every file of the bootstrap (it runs in the agent's image).
import fs from 'node:fs';
import path from 'node:path';

/** Makes a logger writing one JSON object per line to fd 2 (synchronously, so nothing is
 *  lost on exit/exec, and without switching the inherited stderr to non-blocking mode). */
export function makeLogger(instanceId, write = (line) => fs.writeSync(2, line)) {
  return (level, msg, fields = {}) => {
    const line = JSON.stringify({
      ts: new Date().toISOString(),
      level,
      msg,
      component: 'agenthost-bootstrap',
      instance_id: instanceId ?? null,
      ...fields,
    });
    try {
      write(`${line}\n`);
    } catch {
      // stderr gone: nothing sensible to do
    }
  };
}

/** execvp-style lookup of the command in PATH. */
export function resolveCommand(command, searchPath) {
  if (command.includes('/')) return path.resolve(command);
  const dirs = (searchPath || '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  for (const dir of dirs) {
    const candidate = path.join(dir || '.', command);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}
