import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { recordSecret } from '@agenthost/testkit';

/**
 * A real S3-compatible server for a suite (s3rver: the S3 REST API over HTTP, objects on disk), a bucket in it, the
 * provisioner's settings for it (the secret in a file, as an operator gives it), and a client to look at the objects.
 */
export async function s3Server(port: number) {
  const dir = await mkdtemp(join(tmpdir(), 'ah-s3-'));
  const server = new S3rver({ port, address: '127.0.0.1', silent: true, directory: join(dir, 'objects') });
  await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const accessKeyId = `AK${randomBytes(8).toString('hex').toUpperCase()}`;
  const secret = randomBytes(24).toString('base64url');
  recordSecret(secret); // the log scan proves it never reaches a log line
  // s3rver knows one account; the suite's key is added to it (it checks the key id; it does not recompute SigV4).
  const { DUMMY_ACCOUNT } = createRequire(import.meta.url)('s3rver/lib/models/account.js') as {
    DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void };
  };
  DUMMY_ACCOUNT.createKeyPair(accessKeyId, secret);
  const secretFile = join(dir, 's3-secret');
  await writeFile(secretFile, secret, { mode: 0o600 });
  const bucket = `ah-backups-${randomBytes(4).toString('hex')}`;
  const s3 = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId, secretAccessKey: secret } });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  let running = true;
  return {
    bucket,
    env: {
      BACKUP_S3_ENDPOINT: endpoint,
      BACKUP_S3_BUCKET: bucket,
      BACKUP_S3_REGION: 'us-east-1',
      BACKUP_S3_ACCESS_KEY_ID: accessKeyId,
      BACKUP_S3_SECRET_ACCESS_KEY_FILE: secretFile,
    },
    /** Object keys under a prefix. */
    async keys(prefix: string): Promise<string[]> {
      return ((await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }))).Contents ?? []).map((o) => o.Key!).sort();
    },
    async get(key: string): Promise<Buffer> {
      return Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray());
    },
    put: async (key: string, body: Buffer) => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }))),
    del: async (key: string) => void (await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }))),
    /** The server goes away (the storage is unreachable). */
    async stop(): Promise<void> {
      if (running) await server.close();
      running = false;
    },
    async remove(): Promise<void> {
      await this.stop();
      s3.destroy();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
