import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError } from '@agenthost/shared';

/**
 * The encrypted archive of one backup: `AHBK` 0x01, a 12-byte IV, the AES-256-GCM ciphertext of the volume's
 * tar, then the 16-byte tag. The key is derived (HKDF-SHA256) from the backup master key for the owner, the
 * instance and the backup, and the header is authenticated too: an archive opens only as the backup of that
 * user's instance it was made as. A file moved to another record, edited or cut fails the tag.
 */

const MAGIC = Buffer.from('AHBK\x01', 'latin1');
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = MAGIC.length + IV_BYTES;

export interface ArchiveIds {
  user_id: string;
  instance_id: string;
  backup_id: string;
}

export function archiveKey(master: Buffer, ids: ArchiveIds): Buffer {
  const info = `agenthost-backup:v1:${ids.user_id}:${ids.instance_id}:${ids.backup_id}`;
  return Buffer.from(hkdfSync('sha256', master, Buffer.from('agenthost-backup'), Buffer.from(info), 32));
}

/** Encrypt a tar stream into `file` (written beside it and renamed once whole); returns the file's size. */
export async function sealArchive(file: string, key: Buffer, tar: Readable | NodeJS.ReadableStream): Promise<number> {
  const iv = randomBytes(IV_BYTES);
  const header = Buffer.concat([MAGIC, iv]);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(header);
  const partial = `${file}.part`;
  const out = createWriteStream(partial, { mode: 0o600 });
  out.write(header);
  try {
    await pipeline(tar as Readable, cipher, out, { end: false });
    await new Promise<void>((resolve, reject) => out.end(cipher.getAuthTag(), (err?: Error | null) => (err ? reject(err) : resolve())));
    await rename(partial, file);
  } catch (err) {
    out.destroy();
    await rm(partial, { force: true });
    throw err;
  }
  return (await stat(file)).size;
}

/** The plaintext tar of an archive. It fails at its end when the tag does not match: use verifyArchive first. */
export async function openArchive(file: string, key: Buffer): Promise<Readable> {
  const { header, tag, size } = await frame(file);
  const decipher = createDecipheriv('aes-256-gcm', key, header.subarray(MAGIC.length));
  decipher.setAAD(header);
  decipher.setAuthTag(tag);
  const out = new PassThrough();
  pipeline(createReadStream(file, { start: HEADER_BYTES, end: size - TAG_BYTES - 1 }), decipher, out).catch((err) => out.destroy(corrupt(err)));
  return out;
}

/**
 * Decrypt the whole archive without keeping anything: throws BACKUP_CORRUPT unless the tag matches. A restore
 * checks first, so that nothing of the instance changes for an archive that cannot be opened.
 */
export async function verifyArchive(file: string, key: Buffer): Promise<void> {
  const plain = await openArchive(file, key);
  const discard = new Transform({ transform: (_chunk, _enc, done) => done() });
  try {
    await pipeline(plain, discard);
  } catch (err) {
    throw err instanceof AppError ? err : corrupt(err);
  }
}

async function frame(file: string): Promise<{ header: Buffer; tag: Buffer; size: number }> {
  const fh = await open(file, 'r');
  try {
    const { size } = await fh.stat();
    if (size < HEADER_BYTES + TAG_BYTES) throw corrupt();
    const header = Buffer.alloc(HEADER_BYTES);
    const tag = Buffer.alloc(TAG_BYTES);
    await fh.read(header, 0, HEADER_BYTES, 0);
    await fh.read(tag, 0, TAG_BYTES, size - TAG_BYTES);
    if (!header.subarray(0, MAGIC.length).equals(MAGIC)) throw corrupt();
    return { header, tag, size };
  } finally {
    await fh.close();
  }
}

const corrupt = (cause?: unknown) => new AppError('BACKUP_CORRUPT', undefined, cause === undefined ? {} : { cause });
