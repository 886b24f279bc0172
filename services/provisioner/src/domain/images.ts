import { validationError } from '@agenthost/shared';
import type { DockerEngine } from '../docker/engine.ts';
import { dockerStatus, o } from '../docker/call.ts';

/** How long an image seen locally is trusted to still be there, so a burst of creates inspects it once. */
const SEEN_FOR_MS = 30_000;
/** How long a repository's tag list is reused by status reads (a rebuilt tag shows within this). */
const TAGS_FOR_MS = 3_000;

/** A tag that reads as a version (2026.9.6, v1.2): compared number by number. Others (latest, t-…) are names, not versions. */
const VERSION = /^v?\d+(\.\d+)*$/;

/** <0, 0, >0 as version a is older than, equal to or newer than b (both VERSION). */
export function compareVersions(a: string, b: string): number {
  const pa = a.replace(/^v/, '').split('.').map(Number);
  const pb = b.replace(/^v/, '').split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The images instances run. Nothing is ever pulled: an image must exist locally (a wrong version is the caller's
 * error). A version resolves to a digest, the local image ID (sha256 of the image's config): a content digest
 * that a rebuilt tag does not keep (docs/decisions/0026-pinned-images-and-upgrades.md).
 */
export class LocalImages {
  private readonly seen = new Map<string, { at: number; id: string }>();
  private readonly envs = new Map<string, boolean>();
  private readonly tagLists = new Map<string, { at: number; tags: Promise<Map<string, string>> }>();

  private readonly engine: DockerEngine;

  constructor(engine: DockerEngine) {
    this.engine = engine;
  }

  async assertPresent(image: string): Promise<void> {
    await this.resolve(image);
  }

  /** The image ID (sha256:…) the tag (or ID) names now; 400 VALIDATION_FAILED on `version` when there is none. */
  async resolve(image: string): Promise<string> {
    const seen = this.seen.get(image);
    // Trusted for a moment only: a tag may be rebuilt, and an image removed.
    if (seen && Date.now() - seen.at < SEEN_FOR_MS) {
      this.engine.assertUp();
      return seen.id;
    }
    try {
      const info = await this.engine.run('image inspect', (abortSignal) => this.engine.docker.getImage(image).inspect(o({ abortSignal })));
      this.seen.set(image, { at: Date.now(), id: info.Id });
      return info.Id;
    } catch (err) {
      if (dockerStatus(err) === 404) throw validationError('version', `no image ${image} is available for this framework version`);
      throw err;
    }
  }

  /** Whether the image's own environment sets `name` (an image ID names one image for good, so this is asked once per ID). */
  async envHas(image: string, name: string): Promise<boolean> {
    let has = this.envs.get(`${image} ${name}`);
    if (has === undefined) {
      const info = await this.engine.run('image inspect', (abortSignal) => this.engine.docker.getImage(image).inspect(o({ abortSignal })));
      has = (info.Config?.Env ?? []).some((e) => e.startsWith(`${name}=`) && e.length > name.length + 1);
      this.envs.set(`${image} ${name}`, has);
    }
    return has;
  }

  /** Forget what a tag resolved to (an upgrade resolves its target afresh: the tag may just have been rebuilt). */
  forget(image: string): void {
    this.seen.delete(image);
  }

  /**
   * Whether an instance pinned to `digest` (its version `version` of repository `repo`) has an update: its tag now
   * names another image (rebuilt), or a newer version of the repository is here (only when its version is a
   * version number). Returns the version to upgrade to, or undefined.
   */
  async updateFor(repo: string, version: string, digest: string | null): Promise<string | undefined> {
    const tags = await this.tags(repo);
    const now = tags.get(version);
    let best: string | undefined = digest && now && now !== digest ? version : undefined;
    if (VERSION.test(version)) {
      for (const tag of tags.keys()) if (VERSION.test(tag) && compareVersions(tag, best ?? version) > 0) best = tag;
    }
    return best;
  }

  /** tag → image ID of every local tag of the repository (one engine call, reused for TAGS_FOR_MS). */
  private tags(repo: string): Promise<Map<string, string>> {
    const cached = this.tagLists.get(repo);
    if (cached && Date.now() - cached.at < TAGS_FOR_MS) return cached.tags;
    const tags = this.engine
      .run('image list', (abortSignal) => this.engine.docker.listImages(o({ filters: { reference: [repo] }, abortSignal })))
      .then((list) => {
        const out = new Map<string, string>();
        for (const img of list) for (const rt of img.RepoTags ?? []) if (rt.startsWith(`${repo}:`)) out.set(rt.slice(repo.length + 1), img.Id);
        return out;
      });
    this.tagLists.set(repo, { at: Date.now(), tags });
    tags.catch(() => this.tagLists.delete(repo));
    return tags;
  }
}
