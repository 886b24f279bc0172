import { createHash } from 'node:crypto';
import { contracts } from '@agenthost/shared';
import { docker, STANDIN, waitFor, type Nats } from '@agenthost/testkit';

const P = contracts.provisioner;

/** The local image ID a stand-in tag names now. */
export const imageId = (tag: string): Promise<string> => docker('image', 'inspect', '-f', '{{.Id}}', `${STANDIN}:${tag}`);

/** The image ID the instance's container was created from. */
export const containerImage = (id: string): Promise<string> => docker('inspect', '-f', '{{.Image}}', `agenthost-${id}`);

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** What the running agent says of itself: its state file (in the volume) and digests of its environment. */
export async function agent(port: number): Promise<{ born: string; boots: number; env: Record<string, string> }> {
  const root = (await (await fetch(`http://127.0.0.1:${port}/`)).json()) as { state: { born: string; boots: number } };
  const env = (await (await fetch(`http://127.0.0.1:${port}/env`)).json()) as { sha256: Record<string, string> };
  return { ...root.state, env: env.sha256 };
}

/** The agent runs with this value of an environment variable (it only shows digests). */
export const hasEnv = (a: { env: Record<string, string> }, name: string, value: string): boolean => a.env[name] === sha256(value);

/** The file the tests leave in the instance's state volume, read back through the running container. */
export const proofFile = '/data/upgrade-proof.txt';
export const writeProof = (id: string, text: string) => docker('exec', `agenthost-${id}`, 'sh', '-c', `printf %s '${text}' > ${proofFile}`);
export const readProof = (id: string) => docker('exec', `agenthost-${id}`, 'cat', proofFile);

/** Wait until the instance runs and, with `upgrade`, until its last upgrade is in that state. */
export function settled(n: Nats, user_id: string, instance_id: string, upgrade?: contracts.provisioner.UpgradeView['state'], timeoutMs = 90_000) {
  return waitFor(
    `${instance_id} running${upgrade ? ` (${upgrade})` : ''}`,
    async () => {
      const v = await n.call(P.get, { user_id, instance_id });
      if (v.status === 'failed') throw new Error(`failed: ${v.failure_reason}`);
      return v.status === 'running' && (!upgrade || v.upgrade?.state === upgrade) ? v : undefined;
    },
    timeoutMs,
    250,
  );
}
