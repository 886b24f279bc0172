#!/usr/local/bin/node
// The agent's secret resolver: OpenClaw's `exec` SecretRef provider runs it (secrets.providers.agenthost),
// writes {"protocolVersion":1,"provider","ids"} on stdin and reads {"protocolVersion":1,"values","errors"} from
// stdout. It asks the instance bootstrap's key server (AGENTHOST_KEYS_SOCKET, AGENTHOST_KEYS_TOKEN, passed
// through by the provider's passEnv) and prints its answer; `--all` asks for every key (the stand-in agent).
// The image installs it owned by the agent's user, mode 0500, on the read-only root: OpenClaw runs only an
// exec command that its own user owns and nobody else can write.
import { askKeyServer } from './key-server.mjs';

async function readStdin() {
  let text = '';
  for await (const chunk of process.stdin) {
    text += chunk;
    if (text.length > 256 * 1024) throw new Error('request too large');
  }
  return text;
}

async function main() {
  const socketPath = process.env.AGENTHOST_KEYS_SOCKET;
  const token = process.env.AGENTHOST_KEYS_TOKEN;
  if (!socketPath || !token) throw new Error('AGENTHOST_KEYS_SOCKET / AGENTHOST_KEYS_TOKEN are not set');
  let ids = '*';
  if (!process.argv.includes('--all')) {
    const req = JSON.parse(await readStdin());
    if (req?.protocolVersion !== 1 || !Array.isArray(req.ids)) throw new Error('unsupported request');
    ids = req.ids;
  }
  const reply = await askKeyServer({ socketPath, token, ids });
  process.stdout.write(JSON.stringify({ protocolVersion: 1, values: reply.values ?? {}, errors: reply.errors ?? {} }));
}

main().catch((err) => {
  // Never a value here: only what went wrong.
  process.stderr.write(`agenthost keys-resolver: ${err?.message ?? 'failed'}\n`);
  process.exit(1);
});
