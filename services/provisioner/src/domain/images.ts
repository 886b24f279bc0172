import { validationError } from '@agenthost/shared';
import { dockerStatus, o, type DockerEngine } from '../docker/engine.ts';

/** How long an image seen locally is trusted to still be there, so a burst of creates inspects it once. */
const SEEN_FOR_MS = 30_000;

/** The image must exist locally (nothing is ever pulled): a wrong version is the caller's error. */
export class LocalImages {
  private readonly seen = new Map<string, number>();

  private readonly engine: DockerEngine;

  constructor(engine: DockerEngine) {
    this.engine = engine;
  }

  async assertPresent(image: string): Promise<void> {
    const at = this.seen.get(image);
    if (at && Date.now() - at < SEEN_FOR_MS) return this.engine.assertUp();
    try {
      await this.engine.run('image inspect', (abortSignal) => this.engine.docker.getImage(image).inspect(o({ abortSignal })));
      this.seen.set(image, Date.now());
    } catch (err) {
      if (dockerStatus(err) === 404) throw validationError('version', `no image ${image} is available for this framework version`);
      throw err;
    }
  }
}
