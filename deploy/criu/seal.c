/*
 * A checkpoint's image at rest (deploy/criu/checkpoint.sh, docs/decisions/0049-...): a CRIU image sealed per file in
 * chunks, opened back for `criu restore`, or served to `criu restore --stream` without a plaintext copy anywhere.
 * build.sh builds it into the CRIU runtime directory as `seal`; it runs on the host, never in a container.
 *
 *   seal seal  <key file> <binding> <from dir> <to dir>      every file of a CRIU image directory
 *   seal open  <key file> <binding> <sealed dir> <to dir>    every file back (new files, mode 0600; the probe's baseline)
 *   seal serve <key file> <binding> <sealed dir> <sock dir>  CRIU's image streamer for one restore (the wake's)
 *   seal cat   <key file> <binding> <sealed dir> <name>      one file to stdout (a check)
 *
 * <key file>: 32 raw bytes, or - for standard input (how the provisioner passes it). <binding>: what the image belongs to (the
 * provisioner's: instance, container and checkpoint id), part of every record's AAD.
 *
 * Sealed file: base nonce (12), then records [last (1)][length (4, LE)][ciphertext][GCM tag (16)], each the zstd
 * frame (level 1) of up to 1 MiB of the image, AES-256-GCM with nonce = base ^ record number and AAD = instance,
 * file name, record number and the last flag: a record is authenticated before a byte of it reaches CRIU, and a
 * file moved to another instance or name, reordered or cut short does not open (GCM over a whole file would say so
 * only at its end, after CRIU had read it).
 *
 * serve: CRIU's image streamer (streamer.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "seal.h"

static unsigned char key[32];
static const char *instance; /* the binding */

int full_read(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  return (int)got;
}

int full_write(int fd, const void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, (const char *)buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

static void record_nonce(unsigned char out[12], const unsigned char base[12], uint32_t i) {
  memcpy(out, base, 12);
  for (int b = 0; b < 4; b++) out[8 + b] ^= (unsigned char)(i >> (24 - 8 * b));
}

static int record_aad(char *buf, size_t n, const char *name, uint32_t i, int last) {
  return snprintf(buf, n, "%s/%s/%u/%d", instance, name, i, last);
}

/* AES-256-GCM of one record, either way; 0 when it is authentic (decrypt) or done (encrypt). */
static int gcm(int enc, const unsigned char *nonce, const char *aad, const unsigned char *in, int len, unsigned char *out,
               unsigned char tag[16]) {
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int n = 0, ok = EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce, enc) && EVP_CipherUpdate(c, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) &&
                   EVP_CipherUpdate(c, out, &n, in, len);
  if (ok && !enc) ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, tag);
  ok = ok && EVP_CipherFinal_ex(c, out + n, &n);
  if (ok && enc) ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag);
  EVP_CIPHER_CTX_free(c);
  return ok ? 0 : -1;
}

static int seal_file(const char *from, const char *to, const char *name) {
  int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (in < 0 || out < 0) return -1;
  struct stat st;
  fstat(in, &st);
  uint32_t records = st.st_size ? (uint32_t)((st.st_size + CHUNK - 1) / CHUNK) : 1;
  size_t zmax = ZSTD_compressBound(CHUNK);
  unsigned char base[12], nonce[12], tag[16], *plain = malloc(CHUNK), *z = malloc(zmax), *ct = malloc(zmax);
  char aad[512];
  int rc = RAND_bytes(base, 12) == 1 && full_write(out, base, 12) == 0 ? 0 : -1;
  for (uint32_t i = 0; rc == 0 && i < records; i++) {
    int len = full_read(in, plain, CHUNK);
    size_t zl = ZSTD_compress(z, zmax, plain, (size_t)len, 1);
    unsigned char last = i + 1 == records;
    uint32_t zl32 = (uint32_t)zl;
    record_nonce(nonce, base, i);
    record_aad(aad, sizeof aad, name, i, last);
    if (ZSTD_isError(zl) || gcm(1, nonce, aad, z, (int)zl, ct, tag) || full_write(out, &last, 1) || full_write(out, &zl32, 4) ||
        full_write(out, ct, zl) || full_write(out, tag, 16))
      rc = -1;
  }
  free(plain), free(z), free(ct);
  close(in);
  return close(out) || rc;
}

/*
 * A sealed file's plaintext, in order, into fd (a pipe to CRIU, a new file, stdout). CRIU's restore reads the image
 * as it comes, so the wake waits for whichever is slower: CRIU, or opening the records. Opened one at a time they
 * take turns with CRIU (the wake was their sum); here OPENERS threads open records ahead into a ring of RING
 * records while this thread writes them out in order. Every record is authenticated before a byte of it is written,
 * and any failure stops the file: what was written is a prefix, and the reader sees it cut short.
 */
#define OPENERS 2
#define RING 8
struct record {
  const unsigned char *at; /* its ciphertext */
  uint32_t len;
  unsigned char last;
};
struct opening {
  const unsigned char *base;
  const char *name;
  struct record *records;
  uint32_t count, next, written;
  unsigned char *slot[RING];
  size_t slot_len[RING];
  uint32_t slot_of[RING]; /* record number + 1 of what the slot holds, 0 when free */
  int failed;
  pthread_mutex_t lock;
  pthread_cond_t changed;
};

/* why: OPEN_REFUSED (a record did not open) or OPEN_UNWRITTEN (the reader went away); the first one stays. */
static void fail_opening(struct opening *o, int why) {
  pthread_mutex_lock(&o->lock);
  if (!o->failed) o->failed = why;
  pthread_cond_broadcast(&o->changed);
  pthread_mutex_unlock(&o->lock);
}

static void *open_records(void *arg) {
  struct opening *o = arg;
  size_t zmax = ZSTD_compressBound(CHUNK);
  unsigned char nonce[12], tag[16], *z = malloc(zmax);
  char aad[512];
  for (;;) {
    pthread_mutex_lock(&o->lock);
    while (!o->failed && o->next < o->count && o->next >= o->written + RING) pthread_cond_wait(&o->changed, &o->lock);
    uint32_t i = o->failed ? o->count : o->next++;
    pthread_mutex_unlock(&o->lock);
    if (i >= o->count) break;
    struct record *r = &o->records[i];
    record_nonce(nonce, o->base, i);
    record_aad(aad, sizeof aad, o->name, i, r->last);
    memcpy(tag, r->at + r->len, 16);
    size_t pl;
    if (gcm(0, nonce, aad, r->at, (int)r->len, z, tag) || ZSTD_isError(pl = ZSTD_decompress(o->slot[i % RING], CHUNK, z, r->len)) ||
        (!r->last && pl != CHUNK)) {
      fail_opening(o, OPEN_REFUSED);
      break;
    }
    pthread_mutex_lock(&o->lock);
    o->slot_len[i % RING] = pl;
    o->slot_of[i % RING] = i + 1;
    pthread_cond_broadcast(&o->changed);
    pthread_mutex_unlock(&o->lock);
  }
  free(z);
  return NULL;
}

int open_file(const char *path, const char *name, int out) {
  int in = open(path, O_RDONLY);
  struct stat st;
  if (in < 0 || fstat(in, &st) || st.st_size < 12) return in >= 0 ? close(in), OPEN_REFUSED : OPEN_REFUSED;
  const unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, in, 0);
  close(in);
  if (map == MAP_FAILED) return OPEN_REFUSED;
  struct opening o = {.base = map, .name = name, .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};
  size_t cap = 64, off = 12, zmax = ZSTD_compressBound(CHUNK);
  o.records = malloc(cap * sizeof *o.records);
  int rc = 0;
  for (unsigned char last = 0; !last;) {
    uint32_t zl;
    if (off + 5 > (size_t)st.st_size) { rc = OPEN_REFUSED; break; } /* cut short */
    last = map[off];
    memcpy(&zl, map + off + 1, 4);
    if (zl > zmax || off + 5 + zl + 16 > (size_t)st.st_size) { rc = OPEN_REFUSED; break; }
    if (o.count == cap) o.records = realloc(o.records, (cap *= 2) * sizeof *o.records);
    o.records[o.count++] = (struct record){map + off + 5, zl, last};
    off += 5 + zl + 16;
  }
  if (rc == 0 && off != (size_t)st.st_size) rc = OPEN_REFUSED; /* something after the last record */
  if (rc == 0) {
    int n = o.count < OPENERS ? (int)o.count : OPENERS;
    for (int k = 0; k < RING; k++) o.slot[k] = malloc(CHUNK);
    pthread_t t[OPENERS];
    for (int k = 0; k < n; k++) pthread_create(&t[k], NULL, open_records, &o);
    for (uint32_t i = 0; i < o.count; i++) {
      pthread_mutex_lock(&o.lock);
      while (!o.failed && o.slot_of[i % RING] != i + 1) pthread_cond_wait(&o.changed, &o.lock);
      int failed = o.failed;
      pthread_mutex_unlock(&o.lock);
      if (failed) break;
      if (full_write(out, o.slot[i % RING], o.slot_len[i % RING])) {
        fail_opening(&o, OPEN_UNWRITTEN);
        break;
      }
      pthread_mutex_lock(&o.lock);
      o.slot_of[i % RING] = 0;
      o.written = i + 1;
      pthread_cond_broadcast(&o.changed);
      pthread_mutex_unlock(&o.lock);
    }
    for (int k = 0; k < n; k++) pthread_join(t[k], NULL);
    rc = o.failed;
    for (int k = 0; k < RING; k++) free(o.slot[k]);
  }
  free(o.records);
  munmap((void *)map, (size_t)st.st_size);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 6) return fprintf(stderr, "usage: seal seal|open|serve|cat <key file> <binding> <from> <to>\n"), 2;
  /* "-": standard input, whatever it is (a socket cannot be opened again through /dev/stdin). */
  int kf = strcmp(argv[2], "-") ? open(argv[2], O_RDONLY) : 0;
  if (kf < 0 || full_read(kf, key, 32) != 32) return fprintf(stderr, "seal: no 32-byte key\n"), 2;
  if (kf) close(kf);
  instance = argv[3];
  if (!strcmp(argv[1], "serve")) return serve(argv[4], argv[5]);
  if (!strcmp(argv[1], "cat")) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", argv[4], argv[5]);
    return open_file(path, argv[5], 1) ? 1 : 0;
  }
  int opening = !strcmp(argv[1], "open");
  if (strcmp(argv[1], "seal") && !opening) return 2;
  DIR *d = opendir(argv[4]);
  struct dirent *e;
  int rc = 0;
  char from[4096], to[4096];
  while (d && (e = readdir(d))) {
    if (e->d_type != DT_REG) continue;
    snprintf(from, sizeof from, "%s/%s", argv[4], e->d_name);
    snprintf(to, sizeof to, "%s/%s", argv[5], e->d_name);
    int out = opening ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    /* Opening: a record that does not open is not a plaintext file we could not write (a full tmpfs, say). */
    int why = opening ? (out < 0 ? OPEN_UNWRITTEN : open_file(from, e->d_name, out)) : seal_file(from, to, e->d_name);
    if (why) {
      fprintf(stderr, "seal: %s %s\n", e->d_name,
              !opening ? "could not be sealed"
              : why == OPEN_REFUSED ? "does not open (another binding's, altered or cut short)"
                                    : "opened, but could not be written out (no room or no file)");
      rc = 1;
    }
    if (out >= 0) close(out);
  }
  return d ? rc : 1;
}
