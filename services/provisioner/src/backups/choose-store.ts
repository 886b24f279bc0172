import { join } from 'node:path';
import { S3Store, type S3Settings } from './s3-store.ts';
import { type ArchiveStore, DirStore } from './store.ts';

// Apart from store.ts, which s3-store.ts builds on: the choice between the two stores needs both.

/** The bucket of the configuration (BACKUP_S3_*), if one is set. */
export function backupBucket(c: {
  BACKUP_S3_BUCKET?: string | undefined;
  BACKUP_S3_ENDPOINT?: string | undefined;
  BACKUP_S3_REGION: string;
  BACKUP_S3_ACCESS_KEY_ID?: string | undefined;
  BACKUP_S3_SECRET_ACCESS_KEY?: string | undefined;
}): S3Settings | undefined {
  if (!c.BACKUP_S3_BUCKET) return undefined;
  return {
    bucket: c.BACKUP_S3_BUCKET,
    endpoint: c.BACKUP_S3_ENDPOINT,
    region: c.BACKUP_S3_REGION,
    accessKeyId: c.BACKUP_S3_ACCESS_KEY_ID,
    secretAccessKey: c.BACKUP_S3_SECRET_ACCESS_KEY,
  };
}

/** The store the configuration names: a bucket when BACKUP_S3_BUCKET is set, else the backup directory. */
export function archiveStore(o: { dir: string; scope: string; s3?: S3Settings }): ArchiveStore {
  return o.s3 ? new S3Store(o.s3, o.scope) : new DirStore(join(o.dir, o.scope));
}
