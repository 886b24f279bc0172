import { createHash } from 'node:crypto';
import { contracts } from '@agenthost/shared';
import { docker, dockerTry, standinVariant, STANDIN, waitFor, type Nats } from './helpers.ts';

const P = contracts.provisioner;

/**
 * Stand-in variants of the upgrade tests (tags t-up-…, theirs alone): `mark` is baked into the image as
 * STANDIN_MARK, so the agent's /env tells which image it runs; `crash` exits at once, `never` is never ready.
 */
export async function buildUpgradeImages(prefix: string): Promise<{ one: string; two: string; crash: string; never: string }> {
  const one = `${prefix}-1`;
  const two = `${prefix}-2`;
  const crash = `${prefix}-crash`;
  const never = `${prefix}-never`;
  await standinVariant(one, { STANDIN_MARK: `${prefix}-1` });
  await standinVariant(two, { STANDIN_MARK: `${prefix}-2` });
  await standinVariant(crash, { STANDIN_EXIT_AFTER_MS: '0', STANDIN_EXIT_CODE: '3' });
  await standinVariant(never, { STANDIN_NEVER_READY: '1' });
  return { one, two, crash, never };
}

/** Remove the test's tags (and the images left without a tag by a rebuild), once no container uses them. */
export async function removeUpgradeImages(prefix: string, extra: string[] = []): Promise<void> {
  const tags = (await dockerTry('image', 'ls', '--format', '{{.Tag}}', STANDIN)).stdout.split('\n').filter((t) => t.startsWith(`${prefix}-`));
  for (const ref of [...tags.map((t) => `${STANDIN}:${t}`), ...extra]) await dockerTry('rmi', ref);
}

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
