import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { AppError } from '@agenthost/shared';
import { archiveIdOf, scratch, type ArchiveStore, type StagedArchive } from './store.ts';

/** An S3-compatible bucket (BACKUP_S3_*). Without an access key id the SDK's own chain is used (AWS_SHARED_CREDENTIALS_FILE, a role). */
export interface S3Settings {
  /** Unset: AWS S3 itself. Set (MinIO, Ceph, Garage, R2...): path-style addressing, which every one of them serves. */
  endpoint?: string;
  bucket: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
}

/** The store could not be reached or refused us: a 503 the client may retry, never a 500 (the cause goes to the log). */
const unavailable = (cause: unknown) => new AppError('SERVICE_UNAVAILABLE', 'The backup storage is unavailable', { retryable: true, retryAfter: 30, cause });
const missing = (err: unknown) => err instanceof S3ServiceException && (err.name === 'NoSuchKey' || err.$metadata.httpStatusCode === 404);

/**
 * Archives as objects <scope>/<id>.bak in a bucket. An archive is sealed into a scratch file (ciphertext) and uploaded
 * once whole, so a half upload is never an object; a restore downloads it to a scratch file and opens it there, so the
 * tag is checked over exactly the bytes the bucket holds.
 */
export class S3Store implements ArchiveStore {
  readonly where: string;
  private readonly s3: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(o: S3Settings, scope: string) {
    this.bucket = o.bucket;
    this.prefix = `${scope}/`;
    this.where = `s3://${o.bucket}/${this.prefix}`;
    this.s3 = new S3Client({
      region: o.region,
      ...(o.endpoint ? { endpoint: o.endpoint, forcePathStyle: true } : {}),
      // Checksums only where S3 requires them: a streamed upload otherwise goes out aws-chunked with a trailing
      // checksum, which S3-compatible servers do not all decode (one stored the chunk framing in the object).
      // Integrity does not rest on it: the archive's GCM tag is checked over the bytes downloaded.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...(o.accessKeyId && o.secretAccessKey ? { credentials: { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey } } : {}),
    });
  }

  private key = (id: string) => `${this.prefix}${id}.bak`;

  async stage(id: string): Promise<StagedArchive> {
    const dir = await mkdtemp(join(tmpdir(), 'agenthost-archive-'));
    const file = join(dir, `${id}.bak`);
    const clean = () => rm(dir, { recursive: true, force: true });
    return {
      file,
      commit: async () => {
        try {
          const { size } = await stat(file);
          await this.call(() =>
            this.s3.send(
              new PutObjectCommand({
                Bucket: this.bucket,
                Key: this.key(id),
                Body: createReadStream(file),
                ContentLength: size,
                ContentType: 'application/octet-stream',
              }),
            ),
          );
        } finally {
          await clean();
        }
      },
      discard: clean,
    };
  }

  withFile<T>(id: string, use: (file: string) => Promise<T>): Promise<T> {
    return scratch(async (dir) => {
      const file = join(dir, `${id}.bak`);
      let body: Readable;
      try {
        body = (await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(id) }))).Body as Readable;
      } catch (err) {
        // The row says there is a backup and the bucket has no object: it cannot be restored, as a damaged one.
        if (missing(err)) throw new AppError('BACKUP_CORRUPT', 'The backup archive is missing from the backup storage');
        throw unavailable(err);
      }
      await pipeline(body, createWriteStream(file, { mode: 0o600 })).catch((err) => {
        throw unavailable(err);
      });
      return use(file);
    });
  }

  async remove(id: string): Promise<void> {
    await this.call(() => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(id) })));
  }

  async ids(): Promise<string[]> {
    const ids: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.call(() => this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.prefix, ContinuationToken: token })));
      for (const o of page.Contents ?? []) {
        const id = o.Key ? archiveIdOf(o.Key.slice(this.prefix.length)) : undefined;
        if (id) ids.push(id);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return ids;
  }

  private async call<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw unavailable(err);
    }
  }
}
