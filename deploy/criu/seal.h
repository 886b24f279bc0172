/* What the sealer's parts share (seal.c, streamer.c). */
#include <stddef.h>

/* A record's plaintext at most. */
#define CHUNK (1 << 20)

int full_read(int fd, void *buf, size_t n);
int full_write(int fd, const void *buf, size_t n);
/* What open_file says: 0 when every record opened and was written. */
#define OPEN_REFUSED 1   /* a record did not open: another binding's, altered or cut short */
#define OPEN_UNWRITTEN 2 /* out took no more (CRIU closed its end) */
/* A sealed file's plaintext, in order, into out. */
int open_file(const char *path, const char *name, int out);
/* CRIU's image streamer for <sealed> on <sockdir>/streamer-serve.sock (streamer.c). */
int serve(const char *sealed, const char *sockdir);
