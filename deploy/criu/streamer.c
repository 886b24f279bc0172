/*
 * The sealer's `serve` (seal.c): CRIU's image streamer for one `criu restore --stream` (deploy/criu/checkpoint.sh).
 * CRIU connects to <sock dir>/streamer-serve.sock, asks for each file by name (u32 length + protobuf {1: filename}),
 * is told whether it exists ({1: bool}) and hands over a pipe (SCM_RIGHTS) to write it into. Each file is written by
 * a child of its own (CRIU may read several at once), record by record as open_file authenticates them. Exits 3
 * before it listens if the image's inventory does not open under the binding; at the end it prints `done <n>` and exits n:
 * OPEN_REFUSED (1) if a file did not open, OPEN_UNWRITTEN (2) if CRIU stopped reading one, PROTOCOL_FAILED (4).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seal.h"

/* CRIU broke the stream's protocol (or the socket could not be made). */
#define PROTOCOL_FAILED 4

int serve(const char *sealed, const char *sockdir) {
  /* Another binding's image is told apart from a failed restore before CRIU starts: its inventory must open. */
  char inventory[4096];
  snprintf(inventory, sizeof inventory, "%s/inventory.img", sealed);
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull < 0 || open_file(inventory, "inventory.img", devnull)) return fprintf(stderr, "seal: the image does not open under this binding\n"), 3;
  close(devnull);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s/streamer-serve.sock", sockdir);
  int ls = socket(AF_UNIX, SOCK_STREAM, 0);
  unlink(addr.sun_path);
  if (ls < 0 || bind(ls, (struct sockaddr *)&addr, sizeof addr) || listen(ls, 1)) return perror("seal: listen"), PROTOCOL_FAILED;
  printf("ready\n");
  fflush(stdout);
  int s = accept(ls, NULL, NULL);
  close(ls);
  unlink(addr.sun_path);
  if (s < 0) return PROTOCOL_FAILED;
  signal(SIGPIPE, SIG_IGN);
  int failed = 0;
  for (;;) {
    uint32_t len;
    unsigned char msg[512];
    char name[256], path[4096];
    if (full_read(s, &len, 4) != 4) break; /* CRIU is done */
    if (len < 2 || len > sizeof msg || full_read(s, msg, len) != (int)len || msg[0] != 0x0a || msg[1] != len - 2 || len - 2 >= sizeof name) return PROTOCOL_FAILED;
    memcpy(name, msg + 2, len - 2);
    name[len - 2] = 0;
    if (strchr(name, '/')) return PROTOCOL_FAILED;
    snprintf(path, sizeof path, "%s/%s", sealed, name);
    unsigned char reply[6] = {2, 0, 0, 0, 0x08, access(path, R_OK) == 0};
    if (full_write(s, reply, sizeof reply)) return PROTOCOL_FAILED;
    if (!reply[5]) continue;
    char dummy;
    struct iovec iov = {&dummy, 1};
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    if (recvmsg(s, &mh, 0) <= 0 || !CMSG_FIRSTHDR(&mh)) return PROTOCOL_FAILED;
    int pipefd;
    memcpy(&pipefd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof pipefd);
    pid_t child = fork();
    if (child == 0) {
      /* A pipe of one record: fewer wake-ups of CRIU and of this writer (64 KiB by default); a larger one gained nothing. */
      fcntl(pipefd, F_SETPIPE_SZ, CHUNK);
      int rc = open_file(path, name, pipefd);
      if (rc == OPEN_REFUSED) fprintf(stderr, "seal: %s does not open (another instance's, altered or cut short)\n", name);
      _exit(rc);
    }
    close(pipefd);
  }
  /* OPEN_REFUSED if any file did not open (whatever else happened), else OPEN_UNWRITTEN if any file was not taken whole. */
  int status;
  while (wait(&status) > 0) {
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : OPEN_UNWRITTEN;
    if (rc == OPEN_REFUSED || (rc && !failed)) failed = rc;
  }
  /* checkpoint.sh reads this line; it waits for it only a little when CRIU failed (it may never have connected). */
  printf("done %d\n", failed);
  fflush(stdout);
  return failed;
}
