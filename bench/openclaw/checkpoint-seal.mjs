// The checkpoint probe's at-rest step (checkpoint-probe.sh): each file of a CRIU image directory compressed (zstd,
// level 1: a V8 heap's pages shrink severalfold, and fewer bytes to decrypt and read is most of a wake) and sealed with
// AES-256-GCM (a fresh IV per file, the file's name and the instance as AAD, so a file moved to another name or
// instance does not open), streamed, so a 700 MB image is never held in memory at once.
// Usage: node checkpoint-seal.mjs seal|open <key file> <instance> <from dir> <to dir>
// Sealed file: IV (12) | ciphertext (of the zstd stream) | GCM tag (16).
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { closeSync, createReadStream, createWriteStream, fstatSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { Readable } from 'node:stream';
import { constants, createZstdCompress, createZstdDecompress } from 'node:zlib';
import { pipeline } from 'node:stream/promises';

const [mode, keyFile, instance, from, to] = process.argv.slice(2);
const key = readFileSync(keyFile);
if (key.length !== 32 || !['seal', 'open'].includes(mode)) throw new Error('usage: seal|open <32-byte key file> <instance> <from> <to>');

const CHUNK = 1 << 20;
const zstd = { params: { [constants.ZSTD_c_compressionLevel]: 1 }, chunkSize: CHUNK };

// The files side by side: compression runs on libuv's threads, the cipher on the main one.
const names = readdirSync(from);
const results = await Promise.allSettled(
  names.map(async (name) => {
    const aad = Buffer.from(`${instance}/${name}`);
    if (mode === 'seal') {
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', key, iv).setAAD(aad);
      const out = createWriteStream(`${to}/${name}`, { mode: 0o600 });
      out.write(iv);
      await pipeline(createReadStream(`${from}/${name}`, { highWaterMark: CHUNK }), createZstdCompress(zstd), c, out, { end: false });
      await new Promise((resolve, reject) => out.end(c.getAuthTag(), (err) => (err ? reject(err) : resolve())));
    } else {
      const fd = openSync(`${from}/${name}`, 'r');
      const size = fstatSync(fd).size;
      const iv = Buffer.alloc(12);
      const tag = Buffer.alloc(16);
      readSync(fd, iv, 0, 12, 0);
      readSync(fd, tag, 0, 16, size - 16);
      closeSync(fd);
      const d = createDecipheriv('aes-256-gcm', key, iv).setAAD(aad);
      d.setAuthTag(tag);
      // The tag is checked at the end of the stream: a file that does not open leaves the restore refused.
      const body = size > 28 ? createReadStream(`${from}/${name}`, { start: 12, end: size - 17, highWaterMark: CHUNK }) : Readable.from([]);
      await pipeline(body, d, createZstdDecompress({ chunkSize: CHUNK }), createWriteStream(`${to}/${name}`, { mode: 0o600 }));
    }
  }),
);
const failed = results.find((r) => r.status === 'rejected');
if (failed) {
  // One file not authentic (another key or instance, or altered): GCM gave out its plaintext before the tag said so,
  // so nothing opened is left behind, and the restore is refused.
  if (mode === 'open') for (const name of names) rmSync(`${to}/${name}`, { force: true });
  throw failed.reason;
}
