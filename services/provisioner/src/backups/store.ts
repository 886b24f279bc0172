import { mkdtemp, mkdir, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Store, type S3Settings } from './s3-store.ts';

/** An archive written to a local file, not yet kept: `commit` keeps it as the backup, `discard` drops it. */
export interface StagedArchive {
  file: string;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

/**
 * Where encrypted archives are kept: a directory (the backup volume) or an S3-compatible bucket. Archives are sealed
 * (AES-256-GCM, archive.ts) before they reach a store, so a store only ever holds ciphertext.
 */
export interface ArchiveStore {
  /** For logs: the directory, or s3://bucket/prefix. */
  readonly where: string;
  /** A local file to seal an archive into; the agent is paused only while it is written, not while it is uploaded. */
  stage(id: string): Promise<StagedArchive>;
  /** The archive as a local file for `use` (a bucket's is downloaded, and removed after). */
  withFile<T>(id: string, use: (file: string) => Promise<T>): Promise<T>;
  remove(id: string): Promise<void>;
  /** The ids of the archives kept, for the sweep of archives without a row. */
  ids(): Promise<string[]>;
}

const idOf = (name: string): string | undefined => (name.endsWith('.bak') && name.startsWith('bk-') ? name.slice(0, -4) : undefined);

/** Archives as files <dir>/<id>.bak on the backup volume (BACKUP_DIR). */
export class DirStore implements ArchiveStore {
  readonly where: string;

  constructor(dir: string) {
    this.where = dir;
  }

  private file = (id: string) => join(this.where, `${id}.bak`);

  async stage(id: string): Promise<StagedArchive> {
    await mkdir(this.where, { recursive: true, mode: 0o700 });
    // sealArchive writes <file>.part and renames it once whole: the file is kept as it is.
    return { file: this.file(id), commit: async () => {}, discard: () => rm(this.file(id), { force: true }) };
  }

  withFile<T>(id: string, use: (file: string) => Promise<T>): Promise<T> {
    return use(this.file(id));
  }

  remove(id: string): Promise<void> {
    return rm(this.file(id), { force: true });
  }

  async ids(): Promise<string[]> {
    const names = await readdir(this.where).catch(() => [] as string[]);
    return names.map(idOf).filter((n): n is string => n !== undefined);
  }
}

/** A private temporary directory for one archive on its way to or from a bucket (ciphertext only). */
export async function scratch<T>(use: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'agenthost-archive-'));
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The bucket of the configuration (BACKUP_S3_*), if one is set. */
export function backupBucket(c: {
  BACKUP_S3_BUCKET?: string | undefined;
  BACKUP_S3_ENDPOINT?: string | undefined;
  BACKUP_S3_REGION: string;
  BACKUP_S3_ACCESS_KEY_ID?: string | undefined;
  BACKUP_S3_SECRET_ACCESS_KEY?: string | undefined;
}): S3Settings | undefined {
  if (!c.BACKUP_S3_BUCKET) return undefined;
  return { bucket: c.BACKUP_S3_BUCKET, endpoint: c.BACKUP_S3_ENDPOINT, region: c.BACKUP_S3_REGION, accessKeyId: c.BACKUP_S3_ACCESS_KEY_ID, secretAccessKey: c.BACKUP_S3_SECRET_ACCESS_KEY };
}

/** The store the configuration names: a bucket when BACKUP_S3_BUCKET is set, else the backup directory. */
export function archiveStore(o: { dir: string; scope: string; s3?: S3Settings }): ArchiveStore {
  return o.s3 ? new S3Store(o.s3, o.scope) : new DirStore(join(o.dir, o.scope));
}

export { idOf as archiveIdOf };
